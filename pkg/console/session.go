package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sless-dev/sless/pkg/auth"
)

// CookieName is the session cookie: the caller's token itself, so that
// it is verified exactly as the API verifies a bearer token, and expires
// with it.
const CookieName = "sless_console"

// CSRFField is the hidden form field every POST carries.
const CSRFField = "csrf"

// maxCookieToken bounds a token kept in a cookie: browsers drop cookies
// past about 4 KiB, silently.
const maxCookieToken = 3800

// session is a signed-in caller.
type session struct {
	ID    *auth.Identity
	Token string
	// CSRF is the token of this session's forms (see csrfToken).
	CSRF string
}

type handler func(w http.ResponseWriter, r *http.Request, s *session)

// csrfToken derives the forms' token from the session's: a page of
// another origin can read neither (the cookie is HttpOnly), and every
// replica of the API derives the same one without shared state.
func csrfToken(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("sless console csrf v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// authenticate verifies the session cookie through the API's
// Authenticator, as a bearer token.
func (c *Console) authenticate(r *http.Request) (*session, error) {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return nil, errNoSession
	}
	return c.verify(r, ck.Value)
}

var errNoSession = errors.New("not signed in")

func (c *Console) verify(r *http.Request, token string) (*session, error) {
	br := r.Clone(r.Context())
	br.Header = http.Header{"Authorization": {"Bearer " + token}}
	id, err := c.opts.Auth.Authenticate(br)
	if err != nil {
		return nil, err
	}
	return &session{ID: id, Token: token, CSRF: csrfToken(token)}, nil
}

// signedIn runs h for a caller with a valid session. A page asked for
// without one leads to the sign-in form; anything else is refused 401.
func (c *Console) signedIn(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.authenticate(r)
		if err != nil {
			if !errors.Is(err, errNoSession) {
				// A token that expired or no longer verifies is dropped.
				clearCookie(w, r)
			}
			if r.Method == http.MethodGet && r.Header.Get("HX-Request") == "" && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
				return
			}
			msg := "Sign in first."
			var ae *auth.Error
			if errors.As(err, &ae) {
				msg = "Your token was refused: " + ae.Message + "."
			}
			c.fail(w, r, http.StatusUnauthorized, "Not signed in", msg)
			return
		}
		h(w, r, s)
	}
}

// inNamespace is signedIn plus the API's namespace check: a caller acts in
// its own namespace (an admin in any), and only when it is a tenant's. A
// tenant naming another namespace gets the same 403 whatever is there.
func (c *Console) inNamespace(h handler) http.HandlerFunc {
	return c.signedIn(func(w http.ResponseWriter, r *http.Request, s *session) {
		ns := r.PathValue("ns")
		if len(validation.IsDNS1123Label(ns)) > 0 {
			c.fail(w, r, http.StatusNotFound, "Not found", "There is no namespace of that name.")
			return
		}
		if !s.ID.MayAct(ns) {
			c.fail(w, r, http.StatusForbidden, "Forbidden", s.ID.Subject+" may not see namespace "+ns+".")
			return
		}
		if !c.tenantOK(w, r, s) {
			return
		}
		if name := r.PathValue("name"); name != "" && len(validation.IsDNS1123Label(name)) > 0 {
			c.fail(w, r, http.StatusNotFound, "Not found", "There is no function of that name.")
			return
		}
		h(w, r, s)
	})
}

// tenantOK answers a non-admin whose namespace is no tenant's with 403,
// and says whether the caller may go on.
func (c *Console) tenantOK(w http.ResponseWriter, r *http.Request, s *session) bool {
	if c.opts.TenantNamespaces == nil || s.ID.Admin {
		return true
	}
	ok, err := c.opts.TenantNamespaces.IsTenant(r.Context(), s.ID.Namespace)
	if err != nil {
		c.log.Error("console: check tenant namespace", "namespace", s.ID.Namespace, "error", err)
		c.fail(w, r, http.StatusServiceUnavailable, "Unavailable", "Cannot tell now whether your namespace is a tenant's; try again.")
		return false
	}
	if !ok {
		c.fail(w, r, http.StatusForbidden, "Forbidden", "Namespace "+s.ID.Namespace+" is not a tenant's: only an admin may act there.")
		return false
	}
	return true
}

// checkForm guards a POST: it must come from a page of this origin
// (Origin, or Referer when a browser sends no Origin) and carry the
// session's CSRF token.
func (c *Console) checkForm(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		if msg := crossOrigin(r); msg != "" {
			c.fail(w, r, http.StatusForbidden, "Refused", msg)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		got := r.PostFormValue(CSRFField)
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) != 1 {
			c.fail(w, r, http.StatusForbidden, "Refused", "The form's security token is missing or stale: reload the page and send it again.")
			return
		}
		h(w, r, s)
	}
}

// maxFormBytes bounds a posted form: the invoke form's body is its
// largest field.
const maxFormBytes = 2 << 20

// crossOrigin says why r did not come from a page of this server, or "".
func crossOrigin(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return "The form was sent from another site (" + site + ")."
	}
	from := r.Header.Get("Origin")
	if from == "" || from == "null" {
		from = r.Header.Get("Referer")
	}
	if from == "" {
		return "The form was sent without an Origin or Referer header, so the console cannot tell it came from its own page."
	}
	u, err := url.Parse(from)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return "The form was sent from another origin."
	}
	return ""
}

// loginForm shows the sign-in form; a caller already signed in goes on.
func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	if _, err := c.authenticate(r); err == nil {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", loginData{page: page{Title: "Sign in"}})
}

type loginData struct {
	page
	Error string
}

// login takes a token from the form, verifies it as the API would, and
// keeps it in the session cookie. The token is never in a URL.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if msg := crossOrigin(r); msg != "" {
		c.fail(w, r, http.StatusForbidden, "Refused", msg)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	refuse := func(msg string) {
		c.render(w, r, http.StatusUnauthorized, "login", loginData{page: page{Title: "Sign in"}, Error: msg})
	}
	switch {
	case token == "":
		refuse("Paste your sless token.")
		return
	case len(token) > maxCookieToken:
		refuse("This token is too long to keep in a browser's cookie.")
		return
	}
	s, err := c.verify(r, token)
	if err != nil {
		var ae *auth.Error
		if errors.As(err, &ae) {
			refuse("The token was refused: " + ae.Message + ".")
			return
		}
		c.log.Error("console: verify token", "error", err)
		c.fail(w, r, http.StatusServiceUnavailable, "Unavailable", "The token cannot be checked now; try again.")
		return
	}
	if !c.tenantOK(w, r, s) {
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: token, Path: Prefix,
		HttpOnly: true, Secure: isTLS(r), SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// logout drops the session cookie. It needs no session, only a form of
// this origin: signing out is harmless, but a page elsewhere must not do it.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if msg := crossOrigin(r); msg != "" {
		c.fail(w, r, http.StatusForbidden, "Refused", msg)
		return
	}
	clearCookie(w, r)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, Secure: isTLS(r), SameSite: http.SameSiteStrictMode})
}

// isTLS tells whether the browser reached the console over TLS: directly,
// or through a proxy that says so. A client that lies about it only makes
// its own cookie Secure.
func isTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
