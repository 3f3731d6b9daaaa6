package client

import (
	"context"
	"net/http"

	slessv1alpha1 "github.com/sless-dev/sless/pkg/apis/sless/v1alpha1"
	iot "github.com/sless-dev/sless/pkg/devices"
)

// GetDevice reads one IoTDevice.
func (c *Client) GetDevice(ctx context.Context, ns, name string) (*slessv1alpha1.IoTDevice, error) {
	return get(ctx, c, devices, ns, name)
}

// AllDevices reads every page of a namespace's IoTDevices.
func (c *Client) AllDevices(ctx context.Context, ns string, opts ...ListOption) ([]slessv1alpha1.IoTDevice, error) {
	return listAll(ctx, c, devices, ns, opts)
}

// CreateDevice creates d in its namespace.
func (c *Client) CreateDevice(ctx context.Context, d *slessv1alpha1.IoTDevice) (*slessv1alpha1.IoTDevice, error) {
	d.APIVersion, d.Kind = slessv1alpha1.SchemeGroupVersion.String(), "IoTDevice"
	return create(ctx, c, devices, d.Namespace, d)
}

// PatchDevice applies a JSON merge patch to an IoTDevice.
func (c *Client) PatchDevice(ctx context.Context, ns, name string, p any) (*slessv1alpha1.IoTDevice, error) {
	return patch(ctx, c, devices, ns, name, p)
}

// DeleteDevice deletes an IoTDevice.
func (c *Client) DeleteDevice(ctx context.Context, ns, name string) error {
	return remove(ctx, c, devices, ns, name)
}

// RotateDevice gives a device a new password, shown this once.
func (c *Client) RotateDevice(ctx context.Context, ns, name string) (*iot.Credentials, error) {
	var out iot.Credentials
	if err := c.sendJSON(ctx, http.MethodPost, devices.item(ns, name)+"/rotate", "application/json", struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
