package secrets_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sless-dev/sless/pkg/secrets"
)

func TestValidateData(t *testing.T) {
	many := map[string][]byte{}
	for i := 0; i <= secrets.MaxKeys; i++ {
		many[strings.Repeat("k", i+1)] = nil
	}
	for _, tc := range []struct {
		name string
		data map[string][]byte
		want []string // fields at fault
	}{
		{"ok", map[string][]byte{"password": []byte("x"), "tls.crt": nil, "A_B-c": []byte("y")}, nil},
		{"empty", map[string][]byte{}, []string{"data"}},
		{"slash", map[string][]byte{"a/b": nil}, []string{"data[a/b]"}},
		{"space", map[string][]byte{"a b": nil}, []string{"data[a b]"}},
		{"dot dot", map[string][]byte{"..": nil}, []string{"data[..]"}},
		{"empty key", map[string][]byte{"": nil}, []string{"data[]"}},
		{"key too long", map[string][]byte{strings.Repeat("k", 254): nil}, []string{"data[" + strings.Repeat("k", 254) + "]"}},
		{"too large", map[string][]byte{"k": make([]byte, secrets.MaxBytes)}, []string{"data"}},
		{"too many", many, []string{"data"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := secrets.ValidateData(tc.data, field.NewPath("data"))
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
				if strings.Contains(e.Error(), "\x00\x00\x00\x00") {
					t.Errorf("the error shows the value: %v", e)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("errors %v, want fields %v", errs, tc.want)
			}
		})
	}
}

func TestValidateName(t *testing.T) {
	for name, ok := range map[string]bool{"db": true, "tls.example": true, "a-1": true, "": false, "Db": false,
		"a_b": false, "-a": false, strings.Repeat("a", 253): true, strings.Repeat("a", 254): false} {
		if got := len(secrets.ValidateName(name)) == 0; got != ok {
			t.Errorf("ValidateName(%q) ok=%v, want %v", name, got, ok)
		}
	}
}

func TestReferencedAndVersions(t *testing.T) {
	ref := func(n string) corev1.EnvVar {
		return corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: n}, Key: "k"}}}
	}
	env := []corev1.EnvVar{ref("b"), {Name: "PLAIN", Value: "v"}, ref("a"), ref("b"),
		{Name: "CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}}}
	if got := strings.Join(secrets.Referenced(env), ","); got != "a,b" {
		t.Fatalf("Referenced = %q", got)
	}
	if got := secrets.Versions(map[string]string{"b": "9", "a": "12"}); got != "a=12,b=9" {
		t.Fatalf("Versions = %q", got)
	}
	if secrets.Versions(nil) != "" {
		t.Fatal("Versions of none is not empty")
	}
}

func TestMakeIsManaged(t *testing.T) {
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	s := secrets.Make("ns", "db", map[string][]byte{"b": nil, "a": nil}, now)
	if !secrets.Managed(s) || s.Type != corev1.SecretTypeOpaque {
		t.Fatalf("Make: %+v", s)
	}
	info := secrets.InfoOf(s)
	if strings.Join(info.Keys, ",") != "a,b" || !info.UpdatedAt.Time.Equal(now) {
		t.Fatalf("InfoOf: %+v", info)
	}
	if secrets.Managed(&corev1.Secret{}) {
		t.Fatal("an unlabelled Secret counts as managed")
	}
}
