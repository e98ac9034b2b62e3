package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/store"
)

// scanTarget exercises what the scanner follows: struct fields by name, maps, slices,
// interfaces, and opaque values.
type scanTarget struct {
	ID     int               `json:"id"`
	Name   string            `json:"name"`
	Tasks  []store.Task      `json:"tasks"`
	Labels map[string]int    `json:"labels"`
	Any    any               `json:"any"`
	At     time.Time         `json:"at"`
	Raw    json.RawMessage   `json:"raw"`
	Deep   map[string][]*any `json:"deep"`
}

// FuzzScannerAgreesWithWalker: on every input encoding/json finds well formed, and on
// it with data after it, the scanner refuses exactly what the walker (encoding/json's
// Decoder, token by token) refuses, with the same message, in both modes.
func FuzzScannerAgreesWithWalker(f *testing.F) {
	for _, seed := range []string{`{}`, `{"id":1,"id":2}`, `{"ID":1}`, `{"tasks":[{"ID":1,"ID":1}]}`, `{"tasks":[{"id":1}]}`,
		`{"labels":{"a":1,"a":2}}`, `{"any":{"x":[{"y":1,"y":2}]}}`, `{"raw":{"a":1,"a":1}}`, `{"extra":{"a":[1,{"b":2}]},"name":"n"}`,
		`{"deep":{"k":[{"a":1,"\u0061":2}]}}`, `{"n\u0061me":"x","name":"y"}`, ` [ ] `, `"x"`, `{"at":"2026-01-01T00:00:00Z","at":null}`,
		`{"any":{"":{"k":1,"k":2}}}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) {
			return
		}
		ty := reflect.TypeFor[scanTarget]()
		for _, data := range []string{in, in + " x"} {
			for _, extensible := range []bool{false, true} {
				s := &scanner{data: []byte(data), extensible: extensible}
				serr := s.scan(ty)
				werr := walk([]byte(data), ty, extensible)
				if serr == errMalformed || (serr == nil) != (werr == nil) || (serr != nil && serr.Error() != werr.Error()) {
					t.Fatalf("check(%q, extensible %v): scanner %v, walker %v", data, extensible, serr, werr)
				}
			}
		}
	})
}

// TestScannerLinearInMembers: the duplicate check of an object of many members costs
// one lookup a member beyond the first few, not a comparison with every member read
// before it. 100,000 members (a 1.3 MB body, under what remote accepts) cost fewer
// than two each, where a quadratic check would make five billion comparisons.
func TestScannerLinearInMembers(t *testing.T) {
	t.Parallel()
	const n = 100_000
	members := func(first string) string { // first, then "m000000":1,…
		var b strings.Builder
		b.WriteString(first)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"m%06d":1`, i)
		}
		return b.String()
	}
	for _, c := range []struct {
		what, in   string
		extensible bool
		want       string // "" for accepted
	}{
		{"unknown members, ignored", `{` + members(`"id":1,`) + `}`, true, ""},
		{"a map's keys", `{"labels":{` + members("") + `}}`, false, ""},
		{"a duplicate last", `{"labels":{` + members("") + `,"m000000":2}}`, false, `json: duplicate member "m000000" in labels`},
		{"an interface's keys", `{"any":{` + members("") + `}}`, false, ""},
	} {
		s := &scanner{data: []byte(c.in), extensible: c.extensible}
		err := s.scan(reflect.TypeFor[scanTarget]())
		if got := fmt.Sprint(err); c.want == "" && err != nil || c.want != "" && got != c.want {
			t.Errorf("%s: scan = %v, want %q", c.what, err, c.want)
		}
		if s.compared > 2*n {
			t.Errorf("%s: the duplicate check made %d comparisons for %d members, want at most %d", c.what, s.compared, n, 2*n)
		}
	}
}

// TestScannerDepth: the scanner itself refuses objects and arrays nested over
// MaxDepth levels, those it follows and those it reads past alike, as the walker and
// json.Unmarshal do, and accepts MaxDepth levels. A far deeper input is refused, not
// a stack exhausted.
func TestScannerDepth(t *testing.T) {
	t.Parallel()
	nested := func(n int) string { return strings.Repeat(`[`, n) + strings.Repeat(`]`, n) }
	path := func(n int) string { return strings.Repeat("[0]", n) }
	for _, c := range []struct {
		what, in   string
		extensible bool
		want       string // the message's start; "" for accepted
	}{
		{"MaxDepth levels, followed", `{"any":` + nested(MaxDepth-1) + `}`, false, ""},
		{"MaxDepth levels, read past", `{"raw":` + nested(MaxDepth-1) + `}`, false, ""},
		{"MaxDepth levels, ignored", `{"later":` + nested(MaxDepth-1) + `}`, true, ""},
		{"one more, followed", `{"any":` + nested(MaxDepth) + `}`, false, "json: nested over 10000 levels in any" + path(MaxDepth-1)},
		{"one more, read past", `{"raw":` + nested(MaxDepth) + `}`, false, "json: nested over 10000 levels in raw"},
		{"one more, ignored", `{"later":` + nested(MaxDepth) + `}`, true, "json: nested over 10000 levels in later"},
	} {
		for _, check := range []struct {
			by  string
			err error
		}{
			{"scanner", (&scanner{data: []byte(c.in), extensible: c.extensible}).scan(reflect.TypeFor[scanTarget]())},
			{"walker", walk([]byte(c.in), reflect.TypeFor[scanTarget](), c.extensible)},
		} {
			if got := fmt.Sprint(check.err); c.want == "" && check.err != nil || c.want != "" && got != c.want {
				t.Errorf("%s: %s = %.120v, want %q", c.what, check.by, check.err, c.want)
			}
		}
		jerr := json.Unmarshal([]byte(c.in), new(scanTarget))
		if (jerr == nil) != (c.want == "") {
			t.Errorf("%s: json.Unmarshal = %v, want an error: %v", c.what, jerr, c.want != "")
		}
	}
	deep := []byte(strings.Repeat("[", 1<<23)) // remote's 8 MiB, as deep as it goes
	err := (&scanner{data: deep}).scan(reflect.TypeFor[any]())
	if want := "json: nested over 10000 levels in " + path(MaxDepth); fmt.Sprint(err) != want {
		t.Errorf("scan of %d levels = %.80v, want %.80q", len(deep), err, want)
	}
}

// walk checks data beside t as the scanner does, but token by token through
// encoding/json's Decoder: the oracle the scanner is fuzzed against.
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
		return w.refuse(tooDeep)
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
func (w *walker) object(fields map[string]field, elem reflect.Type) error {
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
			f, ok := fields[name]
			if !ok {
				if problem := misnamed(name, fields, w.extensible); problem != "" {
					return w.refuse(problem)
				}
			}
			t = f.typ
		}
		w.path = append(w.path, step{name: []byte(name), index: -1})
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

// skip reads the rest of an object or array whose opening delimiter was read (and
// counted in w.depth).
func (w *walker) skip() error {
	for open := 1; open > 0; {
		tok, err := w.token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if open++; w.depth+open-1 > MaxDepth {
				return w.refuse(tooDeep)
			}
		case json.Delim('}'), json.Delim(']'):
			open--
		}
	}
	return nil
}

// refuse is the ErrInvalid of problem at the walker's place.
func (w *walker) refuse(problem string) error { return refuseAt(w.path, problem) }

// TestScannerWideStruct: a struct's fields are told apart by index, past the first 64
// too, and apart from ignored members.
func TestScannerWideStruct(t *testing.T) {
	t.Parallel()
	var fs []reflect.StructField
	for i := range 100 {
		fs = append(fs, reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: reflect.TypeFor[int](), Tag: reflect.StructTag(fmt.Sprintf(`json:"f%d"`, i))})
	}
	wide := reflect.StructOf(fs)
	for _, c := range []struct{ in, want string }{
		{`{"f0":1,"f63":1,"f64":1,"f99":1,"g":1,"g0":1}`, ""},
		{`{"f70":1,"f6":1,"f7":1,"f70":2}`, `json: duplicate member "f70"`},
		{`{"f1":1,"f65":1,"f1":2}`, `json: duplicate member "f1"`},
		{`{"f1":1,"g":1,"f2":1,"g":1}`, `json: duplicate member "g"`},
	} {
		err := UnmarshalExtensible([]byte(c.in), reflect.New(wide).Interface())
		if got := fmt.Sprint(err); c.want == "" && err != nil || c.want != "" && got != c.want {
			t.Errorf("UnmarshalExtensible(%s) = %v, want %q", c.in, err, c.want)
		}
	}
}
