package v1alpha1

import (
	"k8s.io/utils/ptr"
)

// DeviceConditionSet is an IoTDevice's: Ready follows CredentialsReady and
// whether the device is enabled.
var DeviceConditionSet = ConditionSet{Ready: DeviceConditionReady, Steps: []string{DeviceConditionCredentials}}

// Reasons of an IoTDevice's conditions, the same on a cluster and in local mode.
const (
	DeviceReasonIssued           = "Issued"
	DeviceReasonConnectable      = "Connectable"
	DeviceReasonDisabled         = "Disabled"
	DeviceReasonSecretConflict   = "SecretConflict"
	DeviceReasonDisconnectFailed = "DisconnectFailed"
	DeviceReasonNoCredentials    = "NoCredentials"
)

// SetDefaults fills what the CRD schema defaults.
func (d *IoTDevice) SetDefaults() {
	if d.Spec.Enabled == nil {
		d.Spec.Enabled = ptr.To(true)
	}
}

// IsEnabled says whether the device may connect.
func (d *IoTDevice) IsEnabled() bool { return d.Spec.Enabled == nil || *d.Spec.Enabled }

// Delivers says whether the mqtt trigger named trigger, of function, may
// deliver the device's messages: a device naming a function or a trigger
// keeps its messages to it.
func (d *IoTDevice) Delivers(trigger, function string) bool {
	return (d.Spec.Function == "" || d.Spec.Function == function) && (d.Spec.Trigger == "" || d.Spec.Trigger == trigger)
}

func (s *IoTDeviceStatus) conditions() conditions {
	return conditions{list: &s.Conditions, generation: s.ObservedGeneration}
}

// MarkCredentialsIssued: the device's Secret holds the hash of its password.
func (s *IoTDeviceStatus) MarkCredentialsIssued(secret string) {
	s.CredentialsSecret = secret
	s.conditions().markTrue(DeviceConditionCredentials, DeviceReasonIssued, "Secret "+secret+" holds the device's credentials")
}

// MarkSecretConflict: the credentials' Secret name is taken by a Secret the
// device does not own; the device cannot connect until it is gone.
func (s *IoTDeviceStatus) MarkSecretConflict(secret string) {
	msg := "Secret " + secret + " exists and is not owned by this device: delete it or rename the device"
	s.conditions().markFalse(DeviceConditionCredentials, DeviceReasonSecretConflict, msg)
	s.conditions().markFalse(DeviceConditionReady, DeviceReasonSecretConflict, msg)
}

// MarkNoCredentials: the device's Secret holds no password hash (it was
// edited by hand); `sless device rotate` issues one.
func (s *IoTDeviceStatus) MarkNoCredentials(secret string) {
	msg := "Secret " + secret + " holds no password hash: give the device a new password (sless device rotate)"
	s.conditions().markFalse(DeviceConditionCredentials, DeviceReasonNoCredentials, msg)
	s.conditions().markFalse(DeviceConditionReady, DeviceReasonNoCredentials, msg)
}

// MarkConnectable: the device may connect with its credentials.
func (s *IoTDeviceStatus) MarkConnectable() {
	s.conditions().markTrue(DeviceConditionReady, DeviceReasonConnectable, "the device may connect as "+s.Username)
}

// MarkDisabled: spec.enabled is false; connections are refused and the
// live one was closed.
func (s *IoTDeviceStatus) MarkDisabled() {
	s.conditions().markFalse(DeviceConditionReady, DeviceReasonDisabled, "the device is disabled: its connections are refused")
}

// MarkDisconnectFailed: the broker could not be asked to close the
// device's connections (message says why); it is asked again.
func (s *IoTDeviceStatus) MarkDisconnectFailed(message string) {
	s.conditions().markFalse(DeviceConditionReady, DeviceReasonDisconnectFailed,
		"the device's live connections could not be closed: "+message)
}
