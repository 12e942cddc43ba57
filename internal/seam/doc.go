// Package seam holds no code: its test keeps the import rules between
// capblock's packages, one rule per package, which lists the packages of
// capblock's it may import, and says why (seam_test.go). A new package,
// or a new import between two packages, fails the test until it is added
// to the rules on purpose.
package seam
