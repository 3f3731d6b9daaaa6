package v1alpha1

import (
	"fmt"
	"regexp"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

var deviceAttributeRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// ValidateIoTDevice checks an IoTDevice as the CRD schema does.
func ValidateIoTDevice(d *IoTDevice) field.ErrorList {
	errs := validateName(d.Name, labelNameRE, MaxDeviceNameLength, "a DNS-1123 label")
	p := field.NewPath("spec")
	s := &d.Spec
	if s.Function != "" {
		errs = append(errs, validateRef(p.Child("function"), s.Function)...)
	}
	switch {
	case s.Trigger == "":
	case s.Function != "":
		errs = append(errs, field.Forbidden(p.Child("trigger"), "set function or trigger, not both"))
	case len(s.Trigger) > MaxNameLength:
		errs = append(errs, field.TooLong(p.Child("trigger"), s.Trigger, MaxNameLength))
	case !labelNameRE.MatchString(s.Trigger):
		errs = append(errs, field.Invalid(p.Child("trigger"), s.Trigger, "must name a Trigger: a DNS-1123 label"))
	}
	ap := p.Child("attributes")
	if len(s.Attributes) > MaxDeviceAttributes {
		errs = append(errs, field.TooMany(ap, len(s.Attributes), MaxDeviceAttributes))
	}
	keys := make([]string, 0, len(s.Attributes))
	for k := range s.Attributes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !deviceAttributeRE.MatchString(k) {
			errs = append(errs, field.Invalid(ap, k, "attribute names must be 1-63 letters, digits, -, _ and ., starting and ending with a letter or digit"))
		}
		if v := s.Attributes[k]; len([]rune(v)) > MaxDeviceAttributeValueBytes {
			errs = append(errs, field.Invalid(ap, fmt.Sprintf("%d characters", len([]rune(v))), "attribute "+k+": values must be at most 256 characters"))
		}
	}
	return errs
}
