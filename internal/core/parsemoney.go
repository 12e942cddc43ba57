package core

import (
	"fmt"
	"math"
)

// ParseMoney parses a decimal amount such as "98.32", "4", "-12.5" or
// "0.07" in the given currency into integer minor units (cents). At most two
// decimals are allowed; no floating point is involved. The currency must be
// a three-letter ISO 4217 code in capitals (USD, EUR).
func ParseMoney(s, currency string) (Money, error) {
	if err := CheckCurrency(currency); err != nil {
		return Money{}, err
	}
	minor, err := ParseDecimal(s, 2)
	if err != nil {
		return Money{}, fmt.Errorf("amount %q: %w", s, err)
	}
	return Money{Minor: minor, Currency: currency}, nil
}

// CheckCurrency accepts three capital ASCII letters (an ISO 4217 code).
func CheckCurrency(c string) error {
	if len(c) != 3 {
		return fmt.Errorf("currency %q is not a three-letter ISO 4217 code such as USD", c)
	}
	for i := range len(c) {
		if c[i] < 'A' || c[i] > 'Z' {
			return fmt.Errorf("currency %q is not a three-letter ISO 4217 code such as USD", c)
		}
	}
	return nil
}

// ParseDecimal parses an optionally negative decimal number with at most
// scale decimals into an integer counted in 10^-scale units: with scale 2,
// "98.3" is 9830. It rejects exponents, signs other than a leading minus,
// underscores, a dot without digits on both sides and overflow.
func ParseDecimal(s string, scale int) (int64, error) {
	neg := false
	rest := s
	if len(rest) > 0 && rest[0] == '-' {
		neg, rest = true, rest[1:]
	}
	whole, frac := rest, ""
	for i := range len(rest) {
		if rest[i] == '.' {
			whole, frac = rest[:i], rest[i+1:]
			if frac == "" {
				return 0, fmt.Errorf("not a decimal number (write it like 98.32)")
			}
			break
		}
	}
	if whole == "" || !allDigits(whole) || !allDigits(frac) {
		return 0, fmt.Errorf("not a decimal number (write it like 98.32)")
	}
	if len(frac) > scale {
		return 0, fmt.Errorf("has more than %d decimals", scale)
	}
	for len(frac) < scale {
		frac += "0"
	}
	var v int64
	for _, c := range whole + frac {
		d := int64(c - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("is too large")
		}
		v = v*10 + d
	}
	if neg {
		v = -v
	}
	return v, nil
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
