// Package devices holds what sless knows of IoT devices whatever the
// broker: their usernames and topics, their credentials, and who may do
// what (Authority). A broker's HTTP auth protocol is a thin adapter onto
// Authority (pkg/devices/rabbitmq; docs/devices.md says how another
// broker's, such as EMQX's, would follow).
package devices

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The topic trees of devices: a device publishes under
// devices/{namespace}/{name}/ and subscribes under commands/{namespace}/{name}/.
const (
	EventsRoot   = "devices"
	CommandsRoot = "commands"
)

// Keys of a device's credentials Secret. Password is written only when the
// controller issued the first password of a device made with kubectl, for
// its owner to read there; `sless device rotate` removes it.
const (
	KeyUsername     = "username"
	KeyPassword     = "password"
	KeyPasswordHash = "password-sha256"
	// LabelDevice names the device a credentials Secret belongs to.
	LabelDevice = "sless.dev/device"
)

// Username is the MQTT username of device name in namespace ns: the
// device's id, unique on the broker.
func Username(ns, name string) string { return ns + "/" + name }

// ParseUsername is Username's inverse; ok is false for a username that is
// not a device's (two DNS-1123 labels around one /).
func ParseUsername(u string) (ns, name string, ok bool) {
	ns, name, found := strings.Cut(u, "/")
	if !found || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Label(name)) > 0 {
		return "", "", false
	}
	return ns, name, true
}

// EventsTopic is the topic a device publishes under; its messages may go
// to it or any topic below it.
func EventsTopic(ns, name string) string { return EventsRoot + "/" + ns + "/" + name }

// CommandsTopic is the topic a device's commands go under.
func CommandsTopic(ns, name string) string { return CommandsRoot + "/" + ns + "/" + name }

// EventsFilter subscribes to the messages of every device of namespace ns.
func EventsFilter(ns string) string { return EventsRoot + "/" + ns + "/+/#" }

// DeviceOfTopic names the device a message's topic belongs to, and the
// rest of the topic below the device ("" for the device's own topic).
func DeviceOfTopic(topic string) (ns, name, rest string, ok bool) {
	parts := strings.SplitN(topic, "/", 4)
	if len(parts) < 3 || parts[0] != EventsRoot {
		return "", "", "", false
	}
	if len(validation.IsDNS1123Label(parts[1])) > 0 || len(validation.IsDNS1123Label(parts[2])) > 0 {
		return "", "", "", false
	}
	if len(parts) == 4 {
		rest = parts[3]
	}
	return parts[1], parts[2], rest, true
}

// under says whether topic (or filter) is root itself or lies below it.
// Wildcards are allowed only below root: "devices/ns/+" does not stay
// under devices/ns/name.
func under(topic, root string) bool {
	return topic == root || strings.HasPrefix(topic, root+"/")
}

// NewPassword is a fresh random password: 32 bytes from crypto/rand,
// base64url without padding (43 characters).
func NewPassword() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// HashPassword is what the credentials Secret keeps of a password: its
// SHA-256, hex. The passwords are 256 random bits, so a fast hash is as
// strong as a slow one here, and every connect checks one.
func HashPassword(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

// CheckPassword says whether password is the one hash was made of, in time
// that does not depend on where they differ.
func CheckPassword(hash, password string) bool {
	if hash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(hash), []byte(HashPassword(password))) == 1
}

// CredentialsID tells one password from the next without revealing its
// hash: the first 12 hex digits of the hash's own SHA-256.
func CredentialsID(hash string) string {
	if hash == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(hash))
	return hex.EncodeToString(sum[:])[:12]
}

// Broker is what sless asks of the broker devices connect to beyond its
// auth checks: RabbitMQ's management API (rabbitmq.Management) is one.
type Broker interface {
	// Disconnect closes every live connection of username; none is no error.
	Disconnect(ctx context.Context, username string) error
}

// Credentials answer a rotation (POST …/devices/{name}/rotate): the
// password is shown this once.
type Credentials struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Secret        string `json:"secret"`
	CredentialsID string `json:"credentialsID"`
}
