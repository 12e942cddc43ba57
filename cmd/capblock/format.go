package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/client-go/util/jsonpath"
)

// outputFormat is what -o asks for: a table (table, wide) or data (json,
// yaml, jsonpath=TEMPLATE). Data is always the value the API answered,
// as -o json prints it: yaml has the same keys in the same order, and a
// jsonpath template reads the same fields ({.blocks[*].id}).
type outputFormat struct {
	name string // table, wide, json, yaml or jsonpath
	// template is the parsed jsonpath template, of -o jsonpath=… only,
	// and text the template as given.
	template *jsonpath.JSONPath
	text     string
}

// outputFormats are the -o values, as a usage message lists them.
const outputFormats = "table, wide, json, yaml or jsonpath=TEMPLATE"

// parseOutput reads an -o value. A jsonpath template is parsed here, so
// that a bad one fails before any request is made, as a usage error that
// says what is wrong with it.
func parseOutput(s string) (outputFormat, error) {
	switch s {
	case "table", "wide", "json", "yaml":
		return outputFormat{name: s}, nil
	case "jsonpath", "jsonpath=":
		return outputFormat{}, usagef("-o jsonpath needs a template: write it like -o jsonpath='{.blocks[*].id}'")
	}
	text, ok := strings.CutPrefix(s, "jsonpath=")
	if !ok {
		return outputFormat{}, usagef("-o %q: choose %s", s, outputFormats)
	}
	// kubectl's semantics: a missing key prints nothing, not an error
	// (its --allow-missing-template-keys defaults to true).
	j := jsonpath.New("output").AllowMissingKeys(true)
	if err := j.Parse(text); err != nil {
		return outputFormat{}, usagef("-o jsonpath=%s: the template does not parse: %v; write it like -o jsonpath='{.blocks[*].id}'", text, err)
	}
	return outputFormat{name: "jsonpath", template: j, text: text}, nil
}

// jsonOutput reports whether -o asks for data (json, yaml or jsonpath)
// instead of a table: each command then hands printJSON the value the
// API answered, which prints it in the format asked for.
func (a *app) jsonOutput() bool {
	switch a.format.name {
	case "json", "yaml", "jsonpath":
		return true
	}
	return false
}

// wideOutput reports whether tables show every column (-o wide), even
// past 120 columns: offering ids, token ids.
func (a *app) wideOutput() bool { return a.format.name == "wide" }

// printJSON writes v in the data format -o asks for: indented JSON, as
// the API would (the default when no command line set one), YAML or a
// jsonpath template's output. Every character a terminal would act on is
// escaped: v comes from the server.
func (a *app) printJSON(v any) error {
	var out []byte
	var err error
	switch a.format.name {
	case "yaml":
		out, err = printableYAML(v)
	case "jsonpath":
		out, err = a.format.executeJSONPath(v)
	default:
		out, err = printableIndentedJSON(v)
	}
	if err != nil {
		return err
	}
	if _, err := a.stdout.Write(out); err != nil {
		return fmt.Errorf("writing the output: %w", err)
	}
	return nil
}

// printableIndentedJSON is v as indented JSON, escaped by printableJSON.
func printableIndentedJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding JSON: %w", err)
	}
	return printableJSON(buf.Bytes()), nil
}

// executeJSONPath runs the template over v as -o json prints it: decoded
// from its JSON as kubectl decodes an object (whole numbers as int64, so
// that a filter such as ?(@.instanceCount>1) compares them), with every
// string of it escaped by printable first, so that the template's own
// text (its "\n") is written as it is and what came from the server
// cannot act on the terminal.
func (f outputFormat) executeJSONPath(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var data any
	if err := dec.Decode(&data); err != nil {
		return nil, fmt.Errorf("decoding JSON: %w", err)
	}
	var buf bytes.Buffer
	if err := f.template.Execute(&buf, printableValue(data)); err != nil {
		return nil, fmt.Errorf("-o jsonpath=%s: %w (the template reads the fields that -o json prints)", f.text, err)
	}
	return buf.Bytes(), nil
}

// printableValue is a decoded JSON value with each string in it, keys
// too, escaped by printable, and each number an int64 or a float64.
func printableValue(v any) any {
	switch v := v.(type) {
	case string:
		return printable(v)
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i := range v {
			v[i] = printableValue(v[i])
		}
		return v
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[printable(k)] = printableValue(e)
		}
		return m
	}
	return v
}

// printableYAML is v as YAML with the keys of its JSON, in their order.
// A string that printable would change is written double-quoted, with
// what a terminal would act on as a YAML escape (\e, \u202e), which
// decodes to the same string.
func printableYAML(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	node, err := yamlNode(dec)
	if err != nil {
		return nil, fmt.Errorf("converting JSON to YAML: %w", err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(node); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return escapeYAML(buf.Bytes()), nil
}

// yamlNode reads one JSON value from dec as a YAML node: objects keep
// their keys' order, numbers their digits.
func yamlNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		kind, end := yaml.MappingNode, json.Delim('}')
		if tok == '[' {
			kind, end = yaml.SequenceNode, ']'
		}
		n := &yaml.Node{Kind: kind}
		for dec.More() {
			if kind == yaml.MappingNode {
				key, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, yamlString(key.(string)))
			}
			child, err := yamlNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, child)
		}
		if tok, err := dec.Token(); err != nil || tok != end {
			return nil, errors.Join(err, fmt.Errorf("expected %v", end))
		}
		return n, nil
	case string:
		return yamlString(tok), nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(tok.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: tok.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(tok)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// yamlString is a string scalar: quoted where it would read as another
// type ("1234.56", "true"), double-quoted where a character of it is to
// be escaped (escapeYAML).
func yamlString(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if !isPrintable(s) {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

// escapeYAML writes as \u escapes the characters that the YAML encoder
// left as they are but a terminal would act on (U+202E, zero-width
// spaces, C1 controls): yamlString double-quotes every string that holds
// one, where such an escape means the character.
func escapeYAML(b []byte) []byte { return escapeUnprintable(b, true) }

// printEventData writes one event of a followed stream in the data
// format -o asks for: JSON on one line, a YAML document, or the jsonpath
// template over the event.
func (a *app) printEventData(w io.Writer, e any) error {
	switch a.format.name {
	case "yaml":
		out, err := printableYAML(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "---\n%s", out)
		return err
	case "jsonpath":
		out, err := a.format.executeJSONPath(e)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", printableJSON(data))
	return err
}
