package fleet

import "capblock/internal/core"

// ParseMoney is core.ParseMoney: a decimal amount such as "98.32" in a
// currency such as USD, into integer minor units.
func ParseMoney(s, currency string) (core.Money, error) { return core.ParseMoney(s, currency) }

// checkCurrency and parseDecimal are core's, for the fleet file's
// currency and prices.
func checkCurrency(c string) error                    { return core.CheckCurrency(c) }
func parseDecimal(s string, scale int) (int64, error) { return core.ParseDecimal(s, scale) }
