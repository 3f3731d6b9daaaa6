package names

import (
	"math"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
)

func fnOf(name string, gen int64) *slessv1alpha1.Function {
	return &slessv1alpha1.Function{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen}}
}

// Every revision name, warm or not, plain or retemplated, is a DNS-1035
// label starting with "<function>-", as Knative requires of a named
// revision; at generation 100000 a 52-character name with -warm was 64.
func TestRevisionNamesAreLabels(t *testing.T) {
	longest := "f" + strings.Repeat("x", slessv1alpha1.MaxNameLength-1)
	tests := []struct {
		name string
		gen  int64
		want string // "" when only the rules are checked
	}{
		{"hello", 1, "hello-00001"},
		{"hello", 99999, "hello-99999"},
		{"hello", 100000, "hello-100000"},
		{"hello", math.MaxInt64, "hello-9223372036854775807"},
		{longest, 1, longest + "-00001"},
		{longest, 99999, longest + "-99999"},
		{longest, 100000, longest + "-a0000"},
		{longest, 100001, longest + "-a0001"},
		{longest, 100010, longest + "-a0010"},
		{longest, 100360, longest + "-a0100"},
		{longest, 100000 + 26*36*36*36*10 - 1, longest + "-zzzz9"},
		{longest, 100000 + 26*36*36*36*10, longest + "-a0000"}, // the letter form starts again
		{longest, math.MaxInt64, ""},
		{longest[:51], 999999, longest[:51] + "-999999"},
		{longest[:51], 1000000, longest[:51] + "-a00000"},
		{longest[:51], math.MaxInt64, ""},
		{longest[:44], math.MaxInt64, ""},
		{longest[:38], math.MaxInt64, longest[:38] + "-9223372036854775807"},
		{longest[:39], math.MaxInt64, ""},
	}
	for _, tc := range tests {
		fn := fnOf(tc.name, tc.gen)
		rev := Revision(fn)
		if tc.want != "" && rev != tc.want {
			t.Errorf("Revision(%d-character name, generation %d) = %q, want %q", len(tc.name), tc.gen, rev, tc.want)
		}
		if Revision(fn) != rev {
			t.Errorf("Revision(%d-character name, generation %d) is not stable", len(tc.name), tc.gen)
		}
		var digest [32]byte
		for i := range digest {
			digest[i] = byte(tc.gen >> (i % 8))
		}
		for _, n := range []string{rev, WarmRevision(rev), RetemplatedRevision(fn, digest), WarmRevision(RetemplatedRevision(fn, digest))} {
			if errs := validation.IsDNS1035Label(n); len(errs) > 0 {
				t.Errorf("%q (%d characters; generation %d) is not a DNS-1035 label: %v", n, len(n), tc.gen, errs)
			}
			if !strings.HasPrefix(n, tc.name+"-") {
				t.Errorf("%q does not start with the function's name and a dash", n)
			}
		}
	}
}

// The forms never meet: the letter form has a letter (the decimal form has
// none) and a digit (RetemplatedRevision's part has none), and one name
// stands for one generation over the whole span of a 52-character name.
func TestRevisionNamesAreUnique(t *testing.T) {
	longest := strings.Repeat("f", slessv1alpha1.MaxNameLength)
	seen := map[string]int64{}
	check := func(gen int64) {
		rev := Revision(fnOf(longest, gen))
		if prev, ok := seen[rev]; ok {
			t.Fatalf("generations %d and %d are both %q", prev, gen, rev)
		}
		seen[rev] = gen
		part := strings.TrimPrefix(rev, longest+"-")
		if gen >= 100000 && (strings.Trim(part, "0123456789") == "" || strings.Trim(part, "abcdefghijklmnopqrstuvwxyz") == "") {
			t.Fatalf("generation %d is %q: all digits or all letters", gen, part)
		}
	}
	for gen := int64(1); gen <= 300000; gen++ {
		check(gen)
	}
	for gen := int64(100000 + 26*36*36*36*10 - 100000); gen < 100000+26*36*36*36*10; gen++ {
		check(gen)
	}
	if len(seen) != 400000 {
		t.Fatalf("%d names, want 400000", len(seen))
	}
	for gen := int64(1); gen < 100000+26*36*36*36*10; gen += 997 {
		if part := strings.TrimPrefix(Revision(fnOf(longest, gen)), longest+"-"); len(part) != 5 {
			t.Fatalf("generation %d is %q, want five characters", gen, part)
		}
	}
}
