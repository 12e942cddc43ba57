package fleet

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// Error is one problem in a fleet file: what is wrong and where.
type Error struct {
	File  string // set by Load; empty for Parse
	Line  int    // 1-based; 0 when unknown
	Where string // the part of the fleet, e.g. `zone "zone-a" rack "a-r1"`
	Msg   string
}

// Error renders one line: "fleet.yaml:12: zone "zone-a": gpus is 65, want 1 to 64".
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Where != "" {
		b.WriteString(e.Where)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in a fleet file, in file order.
type ErrorList []*Error

// Error renders one problem per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As reach each *Error.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// decodeError turns a YAML parse or decode error into one readable line
// with its position, without the library's source excerpt.
func decodeError(err error) *Error {
	var own *Error
	if errors.As(err, &own) {
		return own
	}
	var (
		typeErr     *yaml.TypeError
		overflowErr *yaml.OverflowError
		yamlErr     yaml.Error
	)
	switch {
	case errors.As(err, &typeErr):
		return &Error{Line: lineOfToken(typeErr), Msg: fmt.Sprintf("%s should be %s", describeValue(typeErr), describeKind(typeErr.DstType))}
	case errors.As(err, &overflowErr):
		return &Error{Line: lineOfToken(overflowErr), Msg: fmt.Sprintf("%s is too large", overflowErr.SrcNum)}
	case errors.As(err, &yamlErr):
		msg := yamlErr.GetMessage()
		msg = strings.Replace(msg, "unknown field", "unknown key", 1)
		return &Error{Line: lineOfToken(yamlErr), Msg: msg}
	}
	return &Error{Msg: err.Error()}
}

func lineOfToken(e yaml.Error) int {
	if tok := e.GetToken(); tok != nil {
		return tok.Position.Line
	}
	return 0
}

// describeValue names what the file holds where another type was expected.
func describeValue(e *yaml.TypeError) string {
	if e.SrcType != nil {
		switch e.SrcType.Kind() {
		case reflect.Slice, reflect.Array:
			return "a list"
		case reflect.Map, reflect.Struct:
			return "a mapping"
		}
	}
	if e.Token == nil || e.Token.Value == "" {
		return "the value"
	}
	return fmt.Sprintf("%q", e.Token.Value)
}

func describeKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping of keys to values"
	}
	return t.String()
}

// lineOf finds the line of a YAML path such as "$.zones[0].racks[1].name".
// When the path is absent (a missing key), it reports the closest
// enclosing node that exists.
func lineOf(file *ast.File, path string) int {
	for path != "" && path != "$" {
		if p, err := yaml.PathString(path); err == nil {
			if n, err := p.FilterFile(file); err == nil && n != nil && n.GetToken() != nil {
				return n.GetToken().Position.Line
			}
		}
		cut := max(strings.LastIndexByte(path, '.'), strings.LastIndexByte(path, '['))
		if cut <= 0 {
			break
		}
		path = path[:cut]
	}
	return 0
}
