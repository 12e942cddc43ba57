package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// lastSearch is what the last `capblock offerings` and `capblock plans
// offerings` found, stored beside the login in last-search.json (mode
// 0600), so that `capblock buy 2` and `capblock plans buy 1` buy a row of
// the table they printed: an offering id is a signed quote of 80 to 100
// characters, made to be copied, not typed.
type lastSearch struct {
	Offerings     *searchRows `json:"offerings,omitempty"`
	PlanOfferings *searchRows `json:"planOfferings,omitempty"`
	// SeriesOfferings keeps an empty id for a row that cannot be bought.
	SeriesOfferings *searchRows `json:"seriesOfferings,omitempty"`
}

// searchRows are the offering ids of one search, in the order printed.
type searchRows struct {
	// URL is the server searched: a row is bought from that server only.
	URL string `json:"url"`
	// ExpiresAt is when the first of the rows' quotes expires (the
	// server's clock).
	ExpiresAt time.Time `json:"expiresAt"`
	IDs       []string  `json:"ids"`
}

// searchKind is which search a row is taken from.
type searchKind struct {
	command string // the command that searches
	idHint  string // what an id of this kind looks like
	rows    func(*lastSearch) **searchRows
}

var (
	blockSearch = searchKind{command: "capblock offerings", idHint: "cbo-…",
		rows: func(s *lastSearch) **searchRows { return &s.Offerings }}
	planSearch = searchKind{command: "capblock plans offerings", idHint: "tpo-…",
		rows: func(s *lastSearch) **searchRows { return &s.PlanOfferings }}
	seriesSearch = searchKind{command: "capblock series search", idHint: "cso-…",
		rows: func(s *lastSearch) **searchRows { return &s.SeriesOfferings }}
)

// lastSearchPath is where the last searches are kept: beside the login.
func (a *app) lastSearchPath() (string, error) {
	path, err := a.configPath()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(path), "last-search.json"), nil
}

// loadLastSearch reads the last searches; none is an empty lastSearch.
func (a *app) loadLastSearch() (lastSearch, error) {
	var s lastSearch
	path, err := a.lastSearchPath()
	if err != nil {
		return s, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("reading the last search: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return lastSearch{}, fmt.Errorf("reading the last search in %s: %w; search again, or remove the file", path, err)
	}
	return s, nil
}

// rememberSearch stores the ids a search printed, replacing the last
// search of that kind. The search itself succeeded, so a failure to store
// it is only noted.
func (a *app) rememberSearch(kind searchKind, ids []string, expiresAt time.Time) {
	err := func() error {
		s, err := a.loadLastSearch()
		if err != nil {
			return err
		}
		*kind.rows(&s) = &searchRows{URL: a.creds.url, ExpiresAt: expiresAt, IDs: ids}
		data, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding the search: %w", err)
		}
		path, err := a.lastSearchPath()
		if err != nil {
			return err
		}
		return writePrivateFile(path, append(data, '\n'))
	}()
	if err != nil {
		a.note("the rows of this search cannot be bought by number: %v", err)
	}
}

// rowNumber reads arg as a row number of a search's table: a positive
// whole number. ok is false for anything else, such as an offering id.
func rowNumber(arg string) (row int, ok bool) {
	row, err := strconv.Atoi(arg)
	if err != nil || row < 1 || arg[0] == '+' {
		return 0, false
	}
	return row, true
}

// offeringArg returns the offering id that a buy command's argument
// stands for: the id itself, or row N of the last search of kind on the
// server at url; label then names the row, for errors.
func (a *app) offeringArg(kind searchKind, arg, url string) (id, label string, err error) {
	row, ok := rowNumber(arg)
	if !ok {
		return arg, "", nil
	}
	s, err := a.loadLastSearch()
	if err != nil {
		return "", "", err
	}
	rows := *kind.rows(&s)
	switch {
	case rows == nil:
		return "", "", fmt.Errorf("there is no earlier search to take row %d from: search with '%s' first, or give an offering id (%s)", row, kind.command, kind.idHint)
	case !sameServer(rows.URL, url):
		return "", "", fmt.Errorf("your last search was on %s, not %s: search again with '%s'", rows.URL, url, kind.command)
	case len(rows.IDs) == 0:
		return "", "", fmt.Errorf("your last search found no offering: search again with '%s'", kind.command)
	case row > len(rows.IDs) && len(rows.IDs) == 1:
		return "", "", fmt.Errorf("row %d: your last search found 1 offering; give row 1", row)
	case row > len(rows.IDs):
		return "", "", fmt.Errorf("row %d: your last search found %d offerings; give a row from 1 to %d", row, len(rows.IDs), len(rows.IDs))
	}
	return rows.IDs[row-1], fmt.Sprintf("row %d of your last search", row), nil
}

// rowError says which row a purchase of a row failed to buy.
func rowError(label string, err error) error {
	if label == "" || err == nil {
		return err
	}
	return fmt.Errorf("%s: %w", label, err)
}
