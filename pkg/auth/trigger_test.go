package auth_test

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/auth"
	"github.com/sless-dev/sless/pkg/auth/triggertoken"
)

// A trigger's credential, as the reconciler issues it with the platform's
// secret, is no caller's token: it would reach every function of its
// namespace and the REST API, until it expires, after its trigger is gone.
func TestTriggerCredentialIsNoCallersToken(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef-auth-test")
	tokens := &triggertoken.HS256{Secret: secret, Issuer: "sless", Audience: "sless"}
	tr := &slessv1alpha1.Trigger{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "team-a", UID: "0b7c"},
		Spec:       slessv1alpha1.TriggerSpec{Function: "report", Type: slessv1alpha1.TriggerTypeCron, Schedule: "@daily"},
	}
	token, _, err := tokens.IssueTriggerToken(tr)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.New(context.Background(), auth.Config{HS256Secret: secret, Issuer: "sless", Audiences: []string{"sless"}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.Verify(context.Background(), token)
	var ae *auth.Error
	if !errors.As(err, &ae) || ae.Reason != auth.ReasonInvalidClaim {
		t.Fatalf("trigger credential verified as %+v, %v; want a 401 %s", id, err, auth.ReasonInvalidClaim)
	}
	// It still is its trigger's credential.
	if _, err := tokens.VerifyTriggerToken(token); err != nil {
		t.Fatal(err)
	}
}
