package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/gin-gonic/gin"
)

// listLimit is the page size a list's ?limit asks for.
func listLimit(c *gin.Context) (int64, *Problem) {
	v := c.Query("limit")
	if v == "" {
		return defaultListLimit, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, badRequestField("limit", v, fmt.Sprintf("must be an integer from 1 to %d", maxListLimit))
	}
	return n, nil
}

// listCursor is what a list's next holds: the apiserver's continue token
// and the list it continues. The apiserver's token names only a key to start
// after, so passed to another kind's list, another namespace's or with
// another selector it would silently start a different list part-way; bound
// to its list, such a cursor is a 400 instead.
type listCursor struct {
	Kind      string `json:"k"`
	Namespace string `json:"n"`
	Selector  string `json:"s,omitempty"`
	Continue  string `json:"c"`
}

func (c listCursor) encode() string {
	b, _ := json.Marshal(c) // strings only: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

// continueOf returns the continue token of cursor s if it continues the
// list want (all fields but Continue); ok is false for anything else.
func continueOf(s string, want listCursor) (token string, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return "", false
	}
	var got listCursor
	if err := json.Unmarshal(b, &got); err != nil || got.Continue == "" {
		return "", false
	}
	token, got.Continue = got.Continue, ""
	return token, got == want
}
