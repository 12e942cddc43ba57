package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// jsonFormat is how the API reads and writes JSON: request bodies are
// matched exactly (decodeJSON, strict.go), and responses are written as
// encoded by encodeResponse.
var jsonFormat = huma.Format{
	Marshal:   writeJSON,
	Unmarshal: decodeJSON,
}

// encodedJSON is a response body that encodeResponse has encoded already.
type encodedJSON []byte

// encodeJSON encodes v as huma's default JSON format does: no HTML
// escaping, a newline at the end.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeJSON is the JSON format's Marshal.
func writeJSON(w io.Writer, v any) error {
	b, ok := v.(encodedJSON)
	if !ok {
		var err error
		if b, err = encodeJSON(v); err != nil {
			return err
		}
	}
	_, err := w.Write(b)
	return err
}

// encodeResponse is a huma transformer: it encodes each response body
// before huma sends the status. huma sends the status first and marshals
// after, so a body that could not be encoded (a time after year 9999) went
// out as a 200 followed by huma's "error marshaling response". Here such
// a body becomes a 500 internal problem, sent before any other status or
// byte; huma's later status is then ignored by the middleware's
// responseWriter, which keeps the first. The cause goes to the request log.
func encodeResponse(ctx huma.Context, status string, v any) (any, error) {
	b, err := encodeJSON(v)
	if err == nil {
		return encodedJSON(b), nil
	}
	var opID string
	if op := ctx.Operation(); op != nil {
		opID = op.OperationID
	}
	recordError(ctx.Context(), fmt.Errorf("encoding the %s response of %s: %w", status, opID, err))
	p := NewProblem(http.StatusInternalServerError, CodeInternal, internalDetail)
	if b, err = encodeJSON(p); err != nil {
		return nil, fmt.Errorf("encoding the problem that replaces a response: %w", err)
	}
	ctx.SetHeader("Content-Type", problemJSON)
	ctx.SetStatus(p.Status)
	return encodedJSON(b), nil
}
