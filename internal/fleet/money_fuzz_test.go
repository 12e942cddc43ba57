package fleet

import (
	"math/big"
	"testing"
)

// FuzzParseMoney: no input panics, and whatever is accepted is exactly
// the decimal written (money never goes through a float) and renders back
// to an amount that parses to the same value.
func FuzzParseMoney(f *testing.F) {
	for _, s := range []string{"98.32", "0", "0.07", "4", "-1", "1e3", "98.325", "９８", "92233720368547758.07", ".5", "5.", " 1", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMoney(s, "USD")
		if err != nil {
			return
		}
		exact, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("ParseMoney accepted %q, which is not a decimal", s)
		}
		if cents := new(big.Rat).Mul(exact, big.NewRat(100, 1)); !cents.IsInt() || cents.Num().Int64() != m.Minor || !cents.Num().IsInt64() {
			t.Fatalf("ParseMoney(%q) = %d cents, want %s", s, m.Minor, exact.FloatString(2))
		}
		again, err := ParseMoney(m.String(), "USD")
		if err != nil || again != m {
			t.Fatalf("%q renders as %q, which parses to %+v, %v", s, m.String(), again, err)
		}
	})
}
