// The names of what an IoTDevice makes.

package names

// DeviceSecret holds a device's MQTT username and its password's hash.
// Device names are at most 63 characters; Secret names may be 253.
func DeviceSecret(device string) string { return device + "-device-credentials" }
