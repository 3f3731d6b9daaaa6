package tfprovider

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/client"
)

func TestNameTaken(t *testing.T) {
	conflict := &client.Error{Status: http.StatusConflict}
	live := &slessv1alpha1.FunctionJob{}
	deleting := &slessv1alpha1.FunctionJob{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}}
	for _, tc := range []struct {
		name     string
		err      error
		existing *slessv1alpha1.FunctionJob
		getErr   error
		want     bool
	}{
		{"conflict with a live object", conflict, live, nil, true},
		{"conflict with one being deleted", conflict, deleting, nil, false},
		{"conflict, then the get fails", conflict, nil, errors.New("down"), false},
		{"not a conflict", &client.Error{Status: http.StatusBadRequest}, live, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			get := func(_ *client.Client, _ context.Context, ns, name string) (*slessv1alpha1.FunctionJob, error) {
				if ns != "ns" || name != "a" {
					t.Errorf("get(%q, %q), want ns/a", ns, name)
				}
				return tc.existing, tc.getErr
			}
			if got := nameTaken(context.Background(), nil, get, "ns", "a", tc.err); got != tc.want {
				t.Errorf("nameTaken = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAddExistsError(t *testing.T) {
	var diags diag.Diagnostics
	addExistsError(&diags, "job", "ns", "a")
	if len(diags) != 1 {
		t.Fatalf("got %d diagnostics, want 1", len(diags))
	}
	if got, want := diags[0].Summary(), "Job already exists"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	if got, want := diags[0].Detail(), "job ns/a already exists; bring it under Terraform with: terraform import <address> ns/a"; got != want {
		t.Errorf("detail %q, want %q", got, want)
	}
}

func TestPlanNewObjectID(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		ns, n      types.String
	}{
		{"both known", "ns/a", types.StringValue("ns"), types.StringValue("a")},
		{"name unknown", "", types.StringValue("ns"), types.StringUnknown()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var diags diag.Diagnostics
			var ns, id types.String
			if !planNewObject(context.Background(), nil, tc.ns, tc.n, &ns, &id, &diags) {
				t.Fatalf("planNewObject failed: %v", diags)
			}
			if !ns.Equal(tc.ns) {
				t.Errorf("namespace %s, want %s", ns, tc.ns)
			}
			if tc.want == "" && !id.IsUnknown() {
				t.Errorf("id %s, want unknown", id)
			}
			if tc.want != "" && id.ValueString() != tc.want {
				t.Errorf("id %s, want %s", id, tc.want)
			}
		})
	}
}
