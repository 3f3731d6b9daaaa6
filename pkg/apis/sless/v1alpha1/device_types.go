package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of an IoTDevice's attributes: they travel in a header of every
// message's call, so they stay small.
const (
	MaxDeviceAttributes          = 32
	MaxDeviceAttributeValueBytes = 256
	MaxDeviceNameLength          = 63
)

// IoTDevice is a device that talks to sless over MQTT with credentials of
// its own: it may publish under devices/{namespace}/{name}/ and subscribe
// under commands/{namespace}/{name}/; an mqtt trigger subscribed to
// devices/{namespace}/+/# hands its messages to a function (docs/devices.md).
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=device;devices,categories=sless
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Enabled",type=boolean,JSONPath=`.spec.enabled`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Username",type=string,JSONPath=`.status.username`,priority=1
// +kubebuilder:printcolumn:name="Messages",type=integer,JSONPath=`.status.messagesIn`
// +kubebuilder:printcolumn:name="Last Seen",type=date,JSONPath=`.status.lastSeen`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="name must be a DNS-1123 label"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="name must be at most 63 characters"
type IoTDevice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec IoTDeviceSpec `json:"spec,omitempty"`
	// +optional
	Status IoTDeviceStatus `json:"status,omitempty"`
}

// IoTDeviceSpec is what the user asks for.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.function) && has(self.trigger))",message="set function or trigger, not both",fieldPath=".trigger",reason="FieldValueForbidden"
type IoTDeviceSpec struct {
	// Function, when set, is to be the only function the device's
	// messages reach, once mqtt triggers can be bound to devices (not yet:
	// kept and shown only, docs/devices.md).
	// +kubebuilder:validation:MaxLength=52
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Function string `json:"function,omitempty"`
	// Trigger, when set, is to name the one mqtt trigger that delivers
	// the device's messages (not yet: kept and shown only).
	// +kubebuilder:validation:MaxLength=52
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Trigger string `json:"trigger,omitempty"`
	// Enabled false refuses the device's connections and closes the one it
	// has, without deleting it.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Attributes describe the device; device-bound mqtt triggers are to
	// send them with its messages (not yet: kept and shown only).
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="attribute names must be 1-63 letters, digits, -, _ and ., starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 256)",message="attribute values must be at most 256 characters"
	// +optional
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Condition types of an IoTDevice.
const (
	DeviceConditionReady       = "Ready"
	DeviceConditionCredentials = "CredentialsReady"
)

// IoTDeviceStatus is what sless observed and did.
type IoTDeviceStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are CredentialsReady (the device's Secret holds its
	// credentials) and Ready (True while the device may connect; False
	// with Disabled, or with why its credentials are missing).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Username the device connects with: {namespace}/{name}.
	// +optional
	Username string `json:"username,omitempty"`
	// CredentialsSecret names the Secret holding the password's hash.
	// +optional
	CredentialsSecret string `json:"credentialsSecret,omitempty"`
	// CredentialsID tells one password from the next (a prefix of a hash
	// of its hash): when it changes, the device's live connections, made
	// with the old one, are closed.
	// +optional
	CredentialsID string `json:"credentialsID,omitempty"`
	// LastSeen is when the device last connected or sent a message.
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
	// MessagesIn counts the device's messages delivered to functions.
	// +optional
	MessagesIn int64 `json:"messagesIn,omitempty"`
	// CommandsOut counts the commands functions sent to the device.
	// +optional
	CommandsOut int64 `json:"commandsOut,omitempty"`
}

// IoTDeviceList is a list of IoTDevices.
//
// +kubebuilder:object:root=true
type IoTDeviceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IoTDevice `json:"items"`
}
