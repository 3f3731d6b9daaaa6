package invoke

// validNamespace reports whether s is a DNS-1123 label, as Kubernetes
// namespaces are.
func validNamespace(s string) bool {
	return dnsLabel(s, 63, false)
}

// validFunctionName reports whether s can name a Function: a DNS-1035 label
// of at most 52 characters.
func validFunctionName(s string) bool {
	return dnsLabel(s, 52, true)
}

func dnsLabel(s string, max int, letterFirst bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9':
			if i == 0 && letterFirst {
				return false
			}
		case c == '-':
			if i == 0 || i == len(s)-1 {
				return false
			}
		default:
			return false
		}
	}
	return true
}
