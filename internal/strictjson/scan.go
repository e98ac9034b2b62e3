package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"unicode/utf8"
)

// scanner checks JSON beside the type it decodes into, in place: it decodes no value
// and allocates nothing but for a member name with an escape. It refuses what walker
// refuses, with the same messages. It does not judge syntax: what it finds malformed
// it leaves to walker (errMalformed), and what it lets through, json.Unmarshal
// judges after it.
type scanner struct {
	data       []byte
	i          int
	path       []scanStep
	extensible bool
	seen       [][][]byte // per depth of objects, the member names read (reused)
}

// scanStep is a step of a scanner's path: a member name, as read, or an array index.
type scanStep struct {
	name  []byte
	index int // when name is nil
}

// refuse is the ErrInvalid of problem at the scanner's place.
func (s *scanner) refuse(problem string) error {
	path := make([]step, len(s.path))
	for k, st := range s.path {
		path[k] = step{name: string(st.name), index: st.index}
	}
	return refuseAt(path, problem)
}

// errMalformed is scanner's answer to input it cannot read: walker's to judge.
var errMalformed = errors.New("malformed")

// check checks the value at the start of the input. Every read past the end of the
// input, or of a byte no JSON has there, stops it with errMalformed.
func (s *scanner) check(t reflect.Type) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(runtime.Error); !ok && r != errMalformed {
				panic(r)
			}
			err = errMalformed
		}
	}()
	s.space()
	return s.value(t, 0)
}

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

// value reads the value at s.i, which decodes into t (nil: read past it).
func (s *scanner) value(t reflect.Type, depth int) error {
	c := s.data[s.i]
	if c != '{' && c != '[' {
		s.scalar()
		return nil
	}
	if t != nil {
		t = indirect(t)
	}
	switch {
	case t == nil: // opaque
	case t.Kind() == reflect.Interface:
		if c == '{' {
			return s.object(nil, t, depth)
		}
		return s.array(t, depth)
	case c == '{' && t.Kind() == reflect.Struct:
		return s.object(fieldsOf(t), nil, depth)
	case c == '{' && t.Kind() == reflect.Map:
		return s.object(nil, t.Elem(), depth)
	case c == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		return s.array(t.Elem(), depth)
	}
	s.skip()
	return nil
}

// object reads the object at s.i; see walker.object.
func (s *scanner) object(fields map[string]reflect.Type, elem reflect.Type, depth int) error {
	for len(s.seen) <= depth {
		s.seen = append(s.seen, nil)
	}
	seen := s.seen[depth][:0]
	defer func() { s.seen[depth] = seen[:0] }()
	s.i++ // '{'
	for {
		s.space()
		if s.data[s.i] == '}' {
			s.i++
			return nil
		}
		name := s.name()
		for _, n := range seen {
			if bytes.Equal(n, name) {
				return s.refuse("duplicate member " + quote(string(name)))
			}
		}
		seen = append(seen, name)
		t := elem
		if fields != nil {
			var ok bool
			if t, ok = fields[string(name)]; !ok {
				if problem, folded := unknown(string(name), fields); folded || !s.extensible {
					return s.refuse(problem)
				}
			}
		}
		s.space()
		s.expect(':')
		s.space()
		s.path = append(s.path, scanStep{name: name})
		if err := s.value(t, depth+1); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.space()
		if s.data[s.i] != '}' {
			s.expect(',')
		}
	}
}

// array reads the array at s.i; see walker.array.
func (s *scanner) array(elem reflect.Type, depth int) error {
	s.i++ // '['
	for k := 0; ; k++ {
		s.space()
		if s.data[s.i] == ']' {
			s.i++
			return nil
		}
		s.path = append(s.path, scanStep{index: k})
		if err := s.value(elem, depth+1); err != nil {
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

// skip reads past the object or array at s.i, unchecked.
func (s *scanner) skip() {
	depth := 0
	for {
		switch s.data[s.i] {
		case '"':
			s.str()
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				s.i++
				return
			}
		}
		s.i++
	}
}
