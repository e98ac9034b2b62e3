// Package strictjson decodes JSON as encoding/json does, but refuses what
// encoding/json lets through silently:
//
//   - an object with the same member name twice, at any depth (encoding/json keeps
//     the last);
//   - a member that names a struct field only when case is ignored ("Reason" for
//     `json:"reason"`);
//   - a member that names no field of the struct it decodes into (UnmarshalExtensible
//     ignores it, for protocols that newer peers may extend);
//   - anything after the value but white space.
//
// It walks the input's tokens beside the type it decodes into, then lets
// encoding/json decode: what it accepts decodes exactly as json.Unmarshal decodes
// it, and what it refuses leaves v untouched. The walk follows struct fields by
// their JSON names (embedded structs' fields included, by encoding/json's rules),
// map values under any key, slice, array and pointer elements. A value whose type
// implements json.Unmarshaler or encoding.TextUnmarshaler (time.Time,
// json.RawMessage) is opaque: its own decoder judges it. So is an interface value,
// but for its objects' duplicate names, which are refused at any depth.
//
// Every refusal is ErrInvalid (errors.Is), and its message names the member at fault
// and where it is, quoted. The messages read "json: …" and carry no "ax:" prefix:
// the caller's wrap adds it.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// ErrInvalid is the error of every input Unmarshal and Decode refuse: malformed JSON,
// a value of the wrong type, or one of the package's refusals.
var ErrInvalid = errors.New("invalid JSON")

// ErrTooLarge is Decode's error for an input over its limit.
var ErrTooLarge = errors.New("JSON input too large")

// MaxDepth is the deepest nesting of objects and arrays accepted, as encoding/json's.
const MaxDepth = 10000

// Unmarshal decodes data, one JSON value, into v, a non-nil pointer, as
// json.Unmarshal does, and refuses what the package doc lists. A refused input
// leaves v untouched; a value of the wrong type may leave it partly set, as
// json.Unmarshal does.
func Unmarshal(data []byte, v any) error {
	return unmarshal(data, v, false)
}

func unmarshal(data []byte, v any, extensible bool) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &json.InvalidUnmarshalError{Type: reflect.TypeOf(v)}
	}
	if err := check(data, rv.Type().Elem(), extensible); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		// Malformed, in a way the scanner read past: the walker says where. (v is as
		// it was: json.Unmarshal judges the syntax before it sets anything.)
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			if werr := walk(data, rv.Type().Elem(), extensible); werr != nil {
				return werr
			}
		}
		return wrapJSON(err)
	}
	return nil
}

// UnmarshalExtensible is Unmarshal for a protocol that newer peers may extend: a
// member that names no field, in any case, is ignored, as json.Unmarshal ignores it.
// A member that matches a field only when case is ignored, a duplicate and trailing
// data are still refused.
func UnmarshalExtensible(data []byte, v any) error {
	return unmarshal(data, v, true)
}

// Decode reads r to its end, at most limit bytes, and decodes what it read as
// Unmarshal does. More than limit bytes is ErrTooLarge; nothing but white space is
// io.EOF, as json.Decoder.Decode answers; an error of r is returned as it is.
func Decode(r io.Reader, limit int64, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	switch {
	case err != nil:
		return err
	case int64(len(data)) > limit:
		return fmt.Errorf("json: the input is over %d bytes: %w", limit, ErrTooLarge)
	case len(bytes.Trim(data, " \t\r\n")) == 0:
		return io.EOF
	}
	return Unmarshal(data, v)
}

// invalidError is a refusal: its message, and what encoding/json said, if it said it.
type invalidError struct {
	msg string
	err error
}

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }
func (e *invalidError) Unwrap() error        { return e.err }

// wrapJSON makes an error of encoding/json's (a syntax or type error) an ErrInvalid.
func wrapJSON(err error) error {
	msg := err.Error()
	if !strings.HasPrefix(msg, "json: ") {
		msg = "json: " + msg
	}
	return &invalidError{msg: msg, err: err}
}

// check walks data beside t, the type it decodes into. It is scanned in place
// (scan.go); what the scanner cannot read is walked token by token by encoding/json's
// Decoder, whose errors say what is wrong and where.
func check(data []byte, t reflect.Type, extensible bool) error {
	s := &scanner{data: data, extensible: extensible}
	if err := s.check(t); err != errMalformed {
		return err
	}
	return walk(data, t, extensible)
}

// walk is check by encoding/json's Decoder, token by token.
func walk(data []byte, t reflect.Type, extensible bool) error {
	w := &walker{dec: json.NewDecoder(bytes.NewReader(data)), extensible: extensible}
	w.dec.UseNumber() // numbers are not converted: a huge one is json.Unmarshal's to judge
	if err := w.value(t); err != nil {
		return err
	}
	if _, err := w.dec.Token(); err != io.EOF {
		return w.refuse("data after the top-level value")
	}
	return nil
}

// walker reads one value's tokens. path is where it is, for messages: member names
// and array indexes.
type walker struct {
	dec        *json.Decoder
	path       []step
	depth      int
	extensible bool // a member that names no field is skipped, not refused
}

// step is one level of a walker's path: an object member or an array index.
type step struct {
	name  string
	index int // when name is ""
}

// token reads the next token; the end of the input is an error here.
func (w *walker) token() (json.Token, error) {
	tok, err := w.dec.Token()
	switch {
	case err == io.EOF:
		return nil, &invalidError{msg: "json: unexpected end of JSON input", err: io.ErrUnexpectedEOF}
	case err != nil:
		return nil, wrapJSON(err)
	}
	return tok, nil
}

// value reads one value that decodes into t.
func (w *walker) value(t reflect.Type) error {
	tok, err := w.token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar: json.Unmarshal judges it
	}
	if w.depth++; w.depth > MaxDepth {
		return w.refuse(fmt.Sprintf("nested over %d levels", MaxDepth))
	}
	defer func() { w.depth-- }()
	if t != nil { // nil: a member UnmarshalExtensible ignores
		t = indirect(t)
	}
	switch {
	case t == nil: // opaque
	case t.Kind() == reflect.Interface:
		if d == '{' {
			return w.object(nil, t)
		}
		return w.array(t)
	case d == '{' && t.Kind() == reflect.Struct:
		return w.object(fieldsOf(t), nil)
	case d == '{' && t.Kind() == reflect.Map:
		return w.object(nil, t.Elem())
	case d == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		return w.array(t.Elem())
	}
	// Opaque, or not what t takes (json.Unmarshal says so): read past it.
	return w.skip()
}

// object reads the members of an object whose '{' was read, up to its '}'. A
// struct's members are the names in fields; a map's or an interface's are any, each
// decoding into elem.
func (w *walker) object(fields map[string]reflect.Type, elem reflect.Type) error {
	seen := map[string]bool{}
	for w.dec.More() {
		tok, err := w.token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		if seen[name] {
			return w.refuse(fmt.Sprintf("duplicate member %s", quote(name)))
		}
		seen[name] = true
		t := elem
		if fields != nil {
			var ok bool
			if t, ok = fields[name]; !ok {
				if problem, folded := unknown(name, fields); folded || !w.extensible {
					return w.refuse(problem)
				}
			}
		}
		w.path = append(w.path, step{name: name})
		if err := w.value(t); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
	_, err := w.token() // '}'
	return err
}

// array reads the elements of an array whose '[' was read, up to its ']'.
func (w *walker) array(elem reflect.Type) error {
	for i := 0; w.dec.More(); i++ {
		w.path = append(w.path, step{index: i})
		if err := w.value(elem); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
	}
	_, err := w.token() // ']'
	return err
}

// skip reads the rest of an object or array whose opening delimiter was read.
func (w *walker) skip() error {
	for depth := 1; depth > 0; {
		tok, err := w.token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if depth++; w.depth+depth > MaxDepth {
				return w.refuse(fmt.Sprintf("nested over %d levels", MaxDepth))
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// unknown says why name is not a member of a struct with fields, and whether it
// matches one when case is ignored.
func unknown(name string, fields map[string]reflect.Type) (problem string, folded bool) {
	for f := range fields {
		if strings.EqualFold(f, name) {
			return fmt.Sprintf("member %s matches field %s only when case is ignored", quote(name), quote(f)), true
		}
	}
	return fmt.Sprintf("unknown member %s", quote(name)), false
}

// refuse is the ErrInvalid of problem at the walker's place.
func (w *walker) refuse(problem string) error { return refuseAt(w.path, problem) }

// refuseAt is the ErrInvalid of problem at path.
func refuseAt(path []step, problem string) error {
	msg := "json: " + problem
	if len(path) > 0 {
		var b strings.Builder
		for _, s := range path {
			if s.name == "" {
				fmt.Fprintf(&b, "[%d]", s.index)
			} else if simpleName(s.name) {
				b.WriteString("." + s.name)
			} else {
				b.WriteString("[" + quote(s.name) + "]")
			}
		}
		msg += " in " + strings.TrimPrefix(b.String(), ".")
	}
	return &invalidError{msg: msg}
}

// maxQuoted bounds a name as a message quotes it, in bytes.
const maxQuoted = 64

// quote quotes s for a message: escaped as Go quotes it, and cut to maxQuoted bytes
// (at a rune boundary) with "…" after.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strconv.Quote(s[:n]) + "…"
}

// simpleName reports whether a path can show s after a dot: a short identifier.
func simpleName(s string) bool {
	if s == "" || len(s) > maxQuoted {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r))) {
			return false
		}
	}
	return true
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// indirect is the type a value of type t decodes as, through its pointers; nil when
// it decodes itself (json.Unmarshaler, encoding.TextUnmarshaler): opaque.
func indirect(t reflect.Type) reflect.Type {
	for {
		if t.Kind() != reflect.Interface && (implements(t) || implements(reflect.PointerTo(t))) {
			return nil
		}
		if t.Kind() != reflect.Pointer {
			return t
		}
		t = t.Elem()
	}
}

func implements(t reflect.Type) bool {
	return t.Implements(unmarshalerType) || t.Implements(textUnmarshalerType)
}

// fields caches fieldsOf by struct type.
var fields sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf returns the JSON names of struct type t's fields, as encoding/json
// decodes them, with each field's type: exported fields by their tag's name or
// their own, "-" left out, embedded structs' fields promoted. Of fields of one name,
// the shallowest wins, then a tagged one; two left equal cancel each other out, and
// the name is no field's.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := fields.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	type candidate struct {
		typ    reflect.Type
		depth  int
		tagged bool
	}
	byName := map[string][]candidate{}
	visited := map[reflect.Type]bool{}
	next, nextCount := []reflect.Type{t}, map[reflect.Type]int{t: 1}
	for depth := 0; len(next) > 0; depth++ {
		current, count := next, nextCount
		next, nextCount = nil, map[reflect.Type]int{}
		for _, st := range current {
			if visited[st] {
				continue
			}
			visited[st] = true
			for i := range st.NumField() {
				sf := st.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !validTag(name) {
					name = ""
				}
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					if nextCount[ft]++; nextCount[ft] == 1 {
						next = append(next, ft)
					}
					continue
				}
				c := candidate{typ: sf.Type, depth: depth, tagged: name != ""}
				if name == "" {
					name = sf.Name
				}
				byName[name] = append(byName[name], c)
				if count[st] > 1 { // the same struct embedded twice at one depth: ambiguous
					byName[name] = append(byName[name], c)
				}
			}
		}
	}
	out := map[string]reflect.Type{}
	for name, cs := range byName {
		var best []candidate
		for _, c := range cs {
			switch {
			case len(best) == 0 || c.depth < best[0].depth:
				best = []candidate{c}
			case c.depth == best[0].depth:
				best = append(best, c)
			}
		}
		var tagged []candidate
		for _, c := range best {
			if c.tagged {
				tagged = append(tagged, c)
			}
		}
		switch {
		case len(tagged) == 1:
			out[name] = tagged[0].typ
		case len(tagged) == 0 && len(best) == 1:
			out[name] = best[0].typ
		}
	}
	fields.Store(t, out)
	return out
}

// validTag reports whether encoding/json takes s as a field's name.
func validTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
