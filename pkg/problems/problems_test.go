package problems_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sless-dev/sless/pkg/problems"
)

func TestQuery(t *testing.T) {
	allowed := []string{"limit", "cursor"}
	for _, tc := range []struct {
		name    string
		raw     string
		allowed []string
		want    []problems.FieldError
		err     bool
	}{
		{name: "empty", raw: "", allowed: allowed},
		{name: "known once each", raw: "limit=5&cursor=abc", allowed: allowed},
		{name: "known and empty", raw: "limit=", allowed: allowed},
		{name: "unknown", raw: "limt=5", allowed: allowed, want: []problems.FieldError{
			{Field: "limt", Type: "FieldValueNotSupported", Detail: "unknown query parameter: the list takes only limit, cursor"}}},
		{name: "repeated", raw: "limit=5&limit=6", allowed: allowed, want: []problems.FieldError{
			{Field: "limit", Type: "FieldValueDuplicate", Detail: "give it once"}}},
		{name: "several, in name order", raw: "zz=1&cursor=a&cursor=b&aa=2", allowed: allowed, want: []problems.FieldError{
			{Field: "aa", Type: "FieldValueNotSupported", Detail: "unknown query parameter: the list takes only limit, cursor"},
			{Field: "cursor", Type: "FieldValueDuplicate", Detail: "give it once"},
			{Field: "zz", Type: "FieldValueNotSupported", Detail: "unknown query parameter: the list takes only limit, cursor"}}},
		{name: "none allowed", raw: "dryRun=All", want: []problems.FieldError{
			{Field: "dryRun", Type: "FieldValueNotSupported", Detail: "unknown query parameter: the list takes no query parameters"}}},
		{name: "bad escape", raw: "cursor=a%zz", allowed: allowed, err: true},
		{name: "semicolon", raw: "limit=5;cursor=a", allowed: allowed, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, err := problems.Query(tc.raw, "the list", tc.allowed)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want an error: %v", err, tc.err)
			}
			if !reflect.DeepEqual(errs, tc.want) {
				t.Errorf("errors = %+v\nwant %+v", errs, tc.want)
			}
		})
	}
}

func TestDetailsOmitsWhatIsUnset(t *testing.T) {
	b, err := json.Marshal(problems.Details{Title: "Not Found", Status: 404})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"title":"Not Found","status":404}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
