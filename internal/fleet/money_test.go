package fleet

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"capblock/internal/core"
)

func TestParseMoney(t *testing.T) {
	tests := map[string]struct {
		amount, currency string
		want             core.Money
		wantErr          string
	}{
		"two decimals":      {amount: "98.32", currency: "USD", want: core.Money{Minor: 9832, Currency: "USD"}},
		"one decimal":       {amount: "98.3", currency: "USD", want: core.Money{Minor: 9830, Currency: "USD"}},
		"whole":             {amount: "4", currency: "EUR", want: core.Money{Minor: 400, Currency: "EUR"}},
		"cents":             {amount: "0.07", currency: "USD", want: core.Money{Minor: 7, Currency: "USD"}},
		"zero":              {amount: "0", currency: "USD", want: core.Money{Minor: 0, Currency: "USD"}},
		"negative":          {amount: "-12.5", currency: "USD", want: core.Money{Minor: -1250, Currency: "USD"}},
		"leading zeros":     {amount: "007.10", currency: "USD", want: core.Money{Minor: 710, Currency: "USD"}},
		"large":             {amount: "92233720368547758.07", currency: "USD", want: core.Money{Minor: 9223372036854775807, Currency: "USD"}},
		"three decimals":    {amount: "1.234", currency: "USD", wantErr: `amount "1.234": has more than 2 decimals`},
		"overflow":          {amount: "92233720368547758.08", currency: "USD", wantErr: `amount "92233720368547758.08": is too large`},
		"empty":             {amount: "", currency: "USD", wantErr: `amount "": not a decimal number (write it like 98.32)`},
		"dot only":          {amount: ".", currency: "USD", wantErr: `amount ".": not a decimal number (write it like 98.32)`},
		"no whole part":     {amount: ".5", currency: "USD", wantErr: `amount ".5": not a decimal number (write it like 98.32)`},
		"trailing dot":      {amount: "5.", currency: "USD", wantErr: `amount "5.": not a decimal number (write it like 98.32)`},
		"plus sign":         {amount: "+5", currency: "USD", wantErr: `amount "+5": not a decimal number (write it like 98.32)`},
		"exponent":          {amount: "1e3", currency: "USD", wantErr: `amount "1e3": not a decimal number (write it like 98.32)`},
		"comma":             {amount: "1,000.00", currency: "USD", wantErr: `amount "1,000.00": not a decimal number (write it like 98.32)`},
		"space":             {amount: " 1", currency: "USD", wantErr: `amount " 1": not a decimal number (write it like 98.32)`},
		"two dots":          {amount: "1.2.3", currency: "USD", wantErr: `amount "1.2.3": not a decimal number (write it like 98.32)`},
		"lower currency":    {amount: "1", currency: "usd", wantErr: `currency "usd" is not a three-letter ISO 4217 code such as USD`},
		"empty currency":    {amount: "1", currency: "", wantErr: `currency "" is not a three-letter ISO 4217 code such as USD`},
		"currency too long": {amount: "1", currency: "DOLLAR", wantErr: `currency "DOLLAR" is not a three-letter ISO 4217 code such as USD`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMoney(tc.amount, tc.currency)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ParseMoney(%q, %q) = %v, %v; want error %q", tc.amount, tc.currency, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMoney(%q, %q): %v", tc.amount, tc.currency, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseMoney(%q, %q) mismatch (-want +got):\n%s", tc.amount, tc.currency, diff)
			}
			if tc.want.Minor >= 0 && got.String() != canonical(tc.amount) {
				t.Errorf("ParseMoney(%q).String() = %q, want %q", tc.amount, got.String(), canonical(tc.amount))
			}
		})
	}
}

// canonical is how core.Money renders the amounts of TestParseMoney.
func canonical(s string) string {
	switch s {
	case "98.3":
		return "98.30"
	case "4":
		return "4.00"
	case "0":
		return "0.00"
	case "007.10":
		return "7.10"
	}
	return s
}
