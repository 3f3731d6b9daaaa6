package cliflags

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// ByteSize reads a size flag: a quantity of bytes (512Ki, 10Mi, 1Gi), 0
// when zero is allowed (it then turns the bound off), else at least least.
func ByteSize(flag, v string, least int64, zeroOK bool) (int64, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a size such as 512Ki, 10Mi or 1Gi: %w", flag, v, err)
	}
	n, ok := q.AsInt64()
	if !ok || n < 0 {
		return 0, fmt.Errorf("%s %q: want a whole number of bytes", flag, v)
	}
	if n == 0 && zeroOK {
		return 0, nil
	}
	if n < least {
		return 0, fmt.Errorf("%s %q: want at least %s", flag, v, resource.NewQuantity(least, resource.BinarySI))
	}
	return n, nil
}
