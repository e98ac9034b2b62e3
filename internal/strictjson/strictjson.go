// Package strictjson decodes JSON as encoding/json does, but refuses what
// encoding/json lets through silently:
//
//   - an object with the same member name twice, at any depth json.Unmarshal reads
//     (encoding/json keeps the last);
//   - a member that names a struct field only when case is ignored ("Reason" for
//     `json:"reason"`);
//   - a member that names no field of the struct it decodes into (UnmarshalExtensible
//     ignores it, for protocols that newer peers may extend);
//   - anything after the value but white space.
//
// It scans the input in place beside the type it decodes into, then lets
// encoding/json decode: what it accepts decodes exactly as json.Unmarshal decodes
// it, and what it refuses leaves v untouched. The scan follows struct fields by
// their JSON names (embedded structs' fields included, by encoding/json's rules),
// map values under any key, slice, array and pointer elements. A value whose type
// implements json.Unmarshaler or encoding.TextUnmarshaler (time.Time,
// json.RawMessage) is opaque: its own decoder judges it. So is an interface value,
// but for its objects' duplicate names, which are refused at any depth. The value of
// a member UnmarshalExtensible ignores is not checked either.
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
	s := scanner{data: data, extensible: extensible}
	if err := s.check(rv.Type().Elem()); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
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

// step is one level of a path, for messages: an object member, by its name as read,
// or an array element.
type step struct {
	name  []byte
	index int // the element's; -1 for a member
}

// misnamed says what is wrong with member name, which names none of a struct's
// fields: that it matches one only when case is ignored, or, unless extensible, that
// it is unknown. It is "" for a member UnmarshalExtensible ignores.
func misnamed(name string, fields map[string]field, extensible bool) string {
	folded, found := "", false
	for f := range fields {
		if strings.EqualFold(f, name) && (!found || f < folded) { // the first by name: one message
			folded, found = f, true
		}
	}
	switch {
	case found:
		return fmt.Sprintf("member %s matches field %s only when case is ignored", quote(name), quote(folded))
	case extensible:
		return ""
	}
	return "unknown member " + quote(name)
}

// refuseAt is the ErrInvalid of problem at path.
func refuseAt(path []step, problem string) error {
	msg := "json: " + problem
	if len(path) > 0 {
		var b strings.Builder
		for _, s := range path {
			switch name := string(s.name); {
			case s.index >= 0:
				fmt.Fprintf(&b, "[%d]", s.index)
			case simpleName(name):
				b.WriteString("." + name)
			default:
				b.WriteString("[" + quote(name) + "]")
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

// field is a struct field as a JSON member names it.
type field struct {
	typ   reflect.Type
	index int // 0, 1, … in the struct's fields, for a set of them
}

// fields caches fieldsOf by struct type.
var fields sync.Map // reflect.Type → map[string]field

// fieldsOf returns the JSON names of struct type t's fields, as encoding/json
// decodes them, with each field's type: exported fields by their tag's name or
// their own, "-" left out, embedded structs' fields promoted. Of fields of one name,
// the shallowest wins, then a tagged one; two left equal cancel each other out, and
// the name is no field's.
func fieldsOf(t reflect.Type) map[string]field {
	if f, ok := fields.Load(t); ok {
		return f.(map[string]field)
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
	out := map[string]field{}
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
			out[name] = field{typ: tagged[0].typ, index: len(out)}
		case len(tagged) == 0 && len(best) == 1:
			out[name] = field{typ: best[0].typ, index: len(out)}
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
