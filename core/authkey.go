package core

// Authorization keys (fi_endpoint(3) auth_key: "An authorization key is
// used to limit communication between endpoints. Only peer endpoints that
// are programmed to use the same authorization key may communicate").
// An endpoint's key travels in its connection requests and answers
// (providers enforce it there); a memory region's key is checked here,
// against the key of the endpoint a peer's operation arrives on. Keys are
// secrets: they show only in their owner's files (attr/auth_key of the
// owner's objects, mode 0600, and the owner's own view of the domain's
// attr/auth_key), never in logs, traces, statistics or shared files.

import (
	"bytes"
	"slices"
	"strings"

	"github.com/fabricfs/fabricfs/core/fi"
)

// parseAuthKey reads a written attr/auth_key: a DATA word (text, or `hex:`
// and hex digits, as ParseData reads private data) of at most
// fi.MaxAuthKeySize bytes; empty for none.
func parseAuthKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	k, err := ParseData(s)
	if err != nil {
		return nil, err
	}
	if len(k) > fi.MaxAuthKeySize {
		return nil, Errorf(fi.EINVAL, "an authorization key of %d bytes: at most %d", len(k), fi.MaxAuthKeySize)
	}
	if len(k) == 0 {
		return nil, nil
	}
	return k, nil
}

// authKeyText is a key as attr/auth_key shows it: as DataWord writes
// private data, empty for none.
func authKeyText(k []byte) string {
	if len(k) == 0 {
		return ""
	}
	return DataWord(k)
}

// keyed reports whether endpoints of type t carry authorization keys: the
// connection-oriented ones, whose connection requests carry them (rxm's
// FI_EP_RDM over FI_EP_MSG connections included); a datagram has none.
func keyed(t fi.EPType) bool { return t == fi.EP_MSG || t == fi.EP_RDM }

// setEPAuthKey is a write of an endpoint's or passive endpoint's
// attr/auth_key: fi_ep_attr.auth_key and auth_key_size.
func setEPAuthKey(in *fi.Info, s string) error {
	k, err := parseAuthKey(s)
	if err != nil {
		return err
	}
	if k != nil && !keyed(in.EPAttr.Type) {
		return Errorf(fi.EINVAL, "%v endpoints take no authorization key: nothing carries it", in.EPAttr.Type)
	}
	in.EPAttr.AuthKey, in.EPAttr.AuthKeySize = k, uint64(len(k))
	return nil
}

// keepAuthKey gives in, an fi_info an endpoint takes in place of old, old's
// authorization key: the key is the application's choice, which a new
// type, a narrowed entry or an fi_info block does not change (an entry of
// a type without keys takes none).
func keepAuthKey(in, old *fi.Info) {
	in.EPAttr.AuthKey, in.EPAttr.AuthKeySize = nil, 0
	if keyed(in.EPAttr.Type) {
		in.EPAttr.AuthKey, in.EPAttr.AuthKeySize = old.EPAttr.AuthKey, old.EPAttr.AuthKeySize
	}
}

// defaultAuthKey gives in the domain's key for uid when it has none of its
// own: "The domain authorization key will be used if auth_key_size is set
// to 0." A datagram endpoint cannot carry one: with a domain key, it is
// refused rather than left unprotected.
func (d *Domain) defaultAuthKey(uid uint32, in *fi.Info) error {
	if in.EPAttr.AuthKeySize != 0 {
		return nil
	}
	k := d.AuthKey(uid)
	if k == nil {
		return nil
	}
	if !keyed(in.EPAttr.Type) {
		return Errorf(fi.EINVAL, "the domain's authorization key applies, and %v endpoints take none", in.EPAttr.Type)
	}
	in.EPAttr.AuthKey, in.EPAttr.AuthKeySize = k, uint64(len(k))
	return nil
}

// AuthKey is the domain's default authorization key for the user uid
// (nil: none). The domain is every user's: each user has a default of
// their own, which only they (and root) see.
func (d *Domain) AuthKey(uid uint32) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.authKeys[uid])
}

// AuthKeyText is AuthKey as the domain's attr/auth_key shows it to uid.
func (d *Domain) AuthKeyText(uid uint32) string { return authKeyText(d.AuthKey(uid)) }

// SetAuthKey is uid's write of the domain's attr/auth_key: the default key
// of the endpoints, passive endpoints and memory regions uid makes in the
// domain from then on (an empty write: none).
func (d *Domain) SetAuthKey(uid uint32, s string) error {
	k, err := parseAuthKey(s)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if k == nil {
		delete(d.authKeys, uid)
		return nil
	}
	if d.authKeys == nil {
		d.authKeys = map[uint32][]byte{}
	}
	d.authKeys[uid] = k
	return nil
}

// sameKey reports whether a peer's operation that arrived on an endpoint
// with key epKey may reach a region with key mrKey: "Only peer endpoints
// that are programmed to use the same authorization key may access the
// memory region" (fi_mr(3)); a region without a key takes any of its
// owner's endpoints.
func sameKey(mrKey, epKey []byte) bool { return len(mrKey) == 0 || bytes.Equal(mrKey, epKey) }
