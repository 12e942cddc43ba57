package fleet

import (
	"fmt"
	"strconv"

	"github.com/goccy/go-yaml/ast"
)

// number is a whole number from the fleet file. Decoding it from the AST
// refuses "1.5" (which a plain int would truncate to 1) and tells a missing
// key from an explicit 0.
type number struct {
	v   int
	set bool
}

// UnmarshalYAML implements yaml.NodeUnmarshaler.
func (n *number) UnmarshalYAML(node ast.Node) error {
	tok := node.GetToken()
	if node.Type() == ast.IntegerType {
		if v, err := strconv.Atoi(tok.Value); err == nil {
			n.v, n.set = v, true
			return nil
		}
	}
	return &Error{Line: tok.Position.Line, Msg: fmt.Sprintf("%s is not a whole number", describeNode(node))}
}

// decimal keeps a number's text exactly as written ("98.30"), so money and
// factors never pass through a float.
type decimal struct {
	text string
	set  bool
}

// UnmarshalYAML implements yaml.NodeUnmarshaler.
func (d *decimal) UnmarshalYAML(node ast.Node) error {
	switch node.Type() {
	case ast.IntegerType, ast.FloatType, ast.StringType:
		d.text, d.set = node.GetToken().Value, true
		return nil
	}
	return &Error{Line: node.GetToken().Position.Line, Msg: fmt.Sprintf("%s is not a decimal number", describeNode(node))}
}

func describeNode(node ast.Node) string {
	switch node.Type() {
	case ast.MappingType, ast.MappingValueType:
		return "a mapping"
	case ast.SequenceType:
		return "a list"
	}
	return fmt.Sprintf("%q", node.GetToken().Value)
}
