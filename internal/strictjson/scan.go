package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"unicode/utf8"
)

// scanner checks JSON beside the type it decodes into, in place: it decodes no value.
// It allocates its sets of names, one per level of objects, reused; a member name
// with an escape; and a copy of each name in an object that has more than
// linearNames names that are not its struct's fields. It does not judge syntax:
// what it finds malformed, and what it reads past, json.Unmarshal judges after it.
type scanner struct {
	data       []byte
	i          int
	path       []step
	extensible bool
	seen       []*members // per level of objects, the member names read (reused)
	compared   int        // name comparisons and lookups of the duplicate check, for tests
}

// errMalformed is scan's answer to input it cannot read: json.Unmarshal's to judge.
var errMalformed = errors.New("malformed")

// check checks data, one JSON value, beside t, the type it decodes into. Malformed
// input is not its to judge: it returns nil, and json.Unmarshal, which judges the
// syntax before it sets anything, says what is wrong.
func (s *scanner) check(t reflect.Type) error {
	if err := s.scan(t); err != errMalformed {
		return err
	}
	return nil
}

// scan is check, answering errMalformed for input it cannot read. Every read past
// the end of the input, or of a byte no JSON has there, stops it with errMalformed.
func (s *scanner) scan(t reflect.Type) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(runtime.Error); !ok && r != errMalformed {
				panic(r)
			}
			err = errMalformed
		}
	}()
	s.space()
	if err := s.value(t, 0); err != nil {
		return err
	}
	s.space()
	if s.i < len(s.data) {
		if !json.Valid(s.data[:s.i]) { // a syntax error the scanner read past comes first
			return errMalformed
		}
		return s.refuse("data after the top-level value")
	}
	return nil
}

// refuse is the ErrInvalid of problem at the scanner's place.
func (s *scanner) refuse(problem string) error { return refuseAt(s.path, problem) }

// tooDeep is the problem of an object or array nested over MaxDepth levels.
var tooDeep = fmt.Sprintf("nested over %d levels", MaxDepth)

// expect reads past c, which must be at s.i.
func (s *scanner) expect(c byte) {
	if s.data[s.i] != c {
		panic(errMalformed)
	}
	s.i++
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value reads the value at s.i, which decodes into t (nil: read past it), inside
// depth objects and arrays.
func (s *scanner) value(t reflect.Type, depth int) error {
	c := s.data[s.i]
	if c != '{' && c != '[' {
		s.scalar()
		return nil
	}
	level := depth + 1
	if level > MaxDepth {
		return s.refuse(tooDeep)
	}
	if t != nil {
		t = indirect(t)
	}
	switch {
	case t == nil: // opaque
	case t.Kind() == reflect.Interface:
		if c == '{' {
			return s.object(nil, t, level)
		}
		return s.array(t, level)
	case c == '{' && t.Kind() == reflect.Struct:
		return s.object(fieldsOf(t), nil, level)
	case c == '{' && t.Kind() == reflect.Map:
		return s.object(nil, t.Elem(), level)
	case c == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		return s.array(t.Elem(), level)
	}
	// Opaque, or not what t takes (json.Unmarshal says so): read past it.
	return s.skip(level)
}

// object reads the object at s.i, at nesting level, up to its '}'. A struct's members
// are the names in fields; a map's or an interface's are any, each decoding into elem.
func (s *scanner) object(fields map[string]field, elem reflect.Type, level int) error {
	for len(s.seen) < level {
		s.seen = append(s.seen, new(members))
	}
	seen := s.seen[level-1]
	defer seen.reset()
	s.i++ // '{'
	for {
		s.space()
		if s.data[s.i] == '}' {
			s.i++
			return nil
		}
		name := s.name()
		f, known := fields[string(name)]
		if !seen.add(name, f, known, &s.compared) {
			return s.refuse("duplicate member " + quote(string(name)))
		}
		t := elem
		if fields != nil {
			if !known {
				if problem := misnamed(string(name), fields, s.extensible); problem != "" {
					return s.refuse(problem)
				}
			}
			t = f.typ
		}
		s.space()
		s.expect(':')
		s.space()
		s.path = append(s.path, step{name: name, index: -1})
		if err := s.value(t, level); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.space()
		if s.data[s.i] != '}' {
			s.expect(',')
		}
	}
}

// array reads the array at s.i, at nesting level, up to its ']'.
func (s *scanner) array(elem reflect.Type, level int) error {
	s.i++ // '['
	for k := 0; ; k++ {
		s.space()
		if s.data[s.i] == ']' {
			s.i++
			return nil
		}
		s.path = append(s.path, step{index: k})
		if err := s.value(elem, level); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.space()
		if s.data[s.i] != ']' {
			s.expect(',')
		}
	}
}

// name reads the member name at s.i, a string: the bytes between its quotes, or,
// when it holds an escape or invalid UTF-8, what they decode to.
func (s *scanner) name() []byte {
	start := s.i
	if s.data[s.i] != '"' {
		panic(errMalformed)
	}
	escaped := s.str()
	raw := s.data[start+1 : s.i-1]
	if !escaped && utf8.Valid(raw) {
		return raw
	}
	var v string
	if err := json.Unmarshal(s.data[start:s.i], &v); err != nil {
		panic(errMalformed)
	}
	return []byte(v)
}

// str reads past the string at s.i and reports whether it holds an escape.
func (s *scanner) str() (escaped bool) {
	s.i++ // '"'
	for {
		switch s.data[s.i] {
		case '"':
			s.i++
			return escaped
		case '\\':
			escaped = true
			s.i += 2
		default:
			s.i++
		}
	}
}

// scalar reads past the string, number or literal at s.i.
func (s *scanner) scalar() {
	if s.data[s.i] == '"' {
		s.str()
		return
	}
	start := s.i
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', ':', '{', '[', '"':
			if s.i == start {
				panic(errMalformed)
			}
			return
		}
		s.i++
	}
}

// skip reads past the object or array at s.i, at nesting level, unchecked but for
// its depth.
func (s *scanner) skip(level int) error {
	for open := 0; ; {
		switch s.data[s.i] {
		case '"':
			s.str()
			continue
		case '{', '[':
			if open++; level+open-1 > MaxDepth {
				return s.refuse(tooDeep)
			}
		case '}', ']':
			if open--; open == 0 {
				s.i++
				return nil
			}
		}
		s.i++
	}
}

// linearNames is how many member names, not a struct's fields, an object's duplicate
// check compares in turn; beyond, it looks them up in a map.
const linearNames = 16

// members is the set of one object's member names, for the duplicate check: a
// struct's fields in a bit set, by index, and other names (slices of the input, or
// decoded) in a list, indexed by a map once it is long.
type members struct {
	fields []uint64
	names  [][]byte
	index  map[string]struct{} // the names, once there are linearNames
}

// add adds name, field f of the struct if known, to the set and reports whether it
// was not there yet; compared counts the comparisons and lookups it makes.
func (m *members) add(name []byte, f field, known bool, compared *int) bool {
	if known {
		*compared++
		w, bit := f.index/64, uint64(1)<<(f.index%64)
		for len(m.fields) <= w {
			m.fields = append(m.fields, 0)
		}
		if m.fields[w]&bit != 0 {
			return false
		}
		m.fields[w] |= bit
		return true
	}
	if len(m.names) < linearNames {
		for _, n := range m.names {
			*compared++
			if bytes.Equal(n, name) {
				return false
			}
		}
		m.names = append(m.names, name)
		return true
	}
	if m.index == nil {
		m.index = make(map[string]struct{})
	}
	if len(m.index) == 0 {
		for _, n := range m.names {
			m.index[string(n)] = struct{}{}
		}
	}
	*compared++
	if _, ok := m.index[string(name)]; ok { // string(name) is not allocated for a lookup
		return false
	}
	m.index[string(name)] = struct{}{}
	m.names = append(m.names, name)
	return true
}

// reset empties the set for the next object at its level, keeping its storage. It
// deletes the names from the map one by one, in time linear in them, where clearing
// the map would cost its largest size every time.
func (m *members) reset() {
	clear(m.fields)
	if len(m.index) > 0 {
		for _, n := range m.names {
			delete(m.index, string(n))
		}
	}
	m.names = m.names[:0]
}
