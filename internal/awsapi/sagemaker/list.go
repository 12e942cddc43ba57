package sagemaker

import (
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
)

// maxPage is the most rows a list answers when MaxResults is not set, and
// the most it may ask for.
const maxPage = 100

// page cuts rows to one page: from the offset that token carries (""
// for the first page), at most max rows (maxPage when nil). next is the
// token of the following page, nil after the last.
//
// A token is an offset into the list as sorted now, so a list that
// changes between pages may repeat or skip a row, as paging over a
// changing list does on AWS too.
func page[T any](rows []T, token string, max *int) ([]T, *string, error) {
	n := maxPage
	if max != nil {
		if *max < 1 || *max > maxPage {
			return nil, nil, validationf("MaxResults %d: want 1 to %d", *max, maxPage)
		}
		n = *max
	}
	from := 0
	if token != "" {
		raw, err := base64.RawURLEncoding.DecodeString(token)
		off, found := strings.CutPrefix(string(raw), "offset:")
		v, aerr := strconv.Atoi(off)
		if err != nil || !found || aerr != nil || v < 0 || v > len(rows) {
			return nil, nil, validationf("NextToken is not one this list gave; list again from the start")
		}
		from = v
	}
	to := min(len(rows), from+n)
	out := rows[from:to]
	if out == nil {
		out = []T{}
	}
	if to == len(rows) {
		return out, nil, nil
	}
	next := base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(to)))
	return out, &next, nil
}

// sortRows sorts rows by the key named by (one of keys; none keeps the
// order given), ascending unless order is "Descending".
func sortRows[T any](rows []T, by, order string, keys map[string]func(a, b T) int) error {
	desc := false
	switch order {
	case "", "Ascending":
	case "Descending":
		desc = true
	default:
		return validationf("SortOrder %q: want Ascending or Descending", order)
	}
	if by == "" {
		if desc {
			slices.Reverse(rows)
		}
		return nil
	}
	cmp, ok := keys[by]
	if !ok {
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		slices.Sort(names)
		return validationf("SortBy %q: want one of %s", by, strings.Join(names, ", "))
	}
	slices.SortStableFunc(rows, func(a, b T) int {
		if desc {
			return cmp(b, a)
		}
		return cmp(a, b)
	})
	return nil
}
