package awsapi

import (
	"strings"

	"capblock/internal/core"
)

// sageMakerPrefix starts the names SageMaker gives instance types
// (ml.p5.48xlarge); EC2's names go without it (p5.48xlarge).
const sageMakerPrefix = "ml."

// AWSName is the name an AWS answer gives the instance type capblockType
// of f: the first of the type's AWS names that starts with prefix, or,
// when prefix is "" (EC2), the first that does not start with "ml.";
// capblock's own name when the type has no such AWS name.
func AWSName(f core.Fleet, capblockType string, prefix string) string {
	t, ok := f.Type(capblockType)
	if !ok {
		return capblockType
	}
	for _, n := range t.AWSNames {
		if prefix == "" && !strings.HasPrefix(n, sageMakerPrefix) || prefix != "" && strings.HasPrefix(n, prefix) {
			return n
		}
	}
	return capblockType
}

// CapblockType finds the instance type of f that an AWS request names,
// by one of its AWS names or by capblock's own name. The fleet file
// keeps AWS names unique and apart from the types' own names.
func CapblockType(f core.Fleet, awsName string) (string, bool) {
	for _, t := range f.Types {
		if t.Name == awsName {
			return t.Name, true
		}
		for _, n := range t.AWSNames {
			if n == awsName {
				return t.Name, true
			}
		}
	}
	return "", false
}
