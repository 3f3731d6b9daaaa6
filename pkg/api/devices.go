package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	"github.com/sless-dev/sless/pkg/devices"
	"github.com/sless-dev/sless/pkg/names"
)

// rotateDevice gives a device a new password (POST …/devices/{name}/rotate):
// its Secret then holds only the new hash, and the controller closes the
// connections made with the old one.
func (s *Server) rotateDevice(c *gin.Context) {
	if s.opts.Secrets == nil {
		writeProblem(c, problem(http.StatusNotImplemented, "no-secrets", "No secret store",
			"this server was started without a secret store, where devices' credentials are kept"))
		return
	}
	ctx := c.Request.Context()
	ns, name := c.Param("ns"), c.Param("name")
	d := &slessv1alpha1.IoTDevice{}
	if err := s.live.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		writeProblem(c, storeProblem(err))
		return
	}
	if d.DeletionTimestamp != nil {
		writeProblem(c, conflict("device %q is being deleted", name))
		return
	}
	password, err := devices.NewPassword()
	if err != nil {
		writeProblem(c, storeProblem(err))
		return
	}
	secret := names.DeviceSecret(name)
	cur := &corev1.Secret{}
	err = s.opts.Secrets.Get(ctx, client.ObjectKey{Namespace: ns, Name: secret}, cur)
	switch {
	case apierrors.IsNotFound(err):
		// The controller has not issued the first password yet.
		err = s.opts.Secrets.Create(ctx, devices.MakeSecret(d, password, false))
		if apierrors.IsAlreadyExists(err) {
			writeProblem(c, conflict("device %q got its first password meanwhile: rotate again", name))
			return
		}
	case err != nil:
	case !devices.OwnedBy(cur, d):
		writeProblem(c, conflict("Secret %q belongs to something else than device %q: delete it or rename the device", secret, name))
		return
	default:
		devices.SetPassword(cur, ns, name, password)
		err = s.opts.Secrets.Update(ctx, cur)
	}
	if err != nil {
		writeProblem(c, s.secretStoreProblem(err, "rotate device credentials", ns, secret))
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, devices.Credentials{
		Username: devices.Username(ns, name), Password: password, Secret: secret,
		CredentialsID: devices.CredentialsID(devices.HashPassword(password)),
	})
}
