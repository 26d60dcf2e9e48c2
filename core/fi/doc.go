// Package fi is libfabric's vocabulary in Go: the fi_info structure and its
// attributes, the constants with libfabric's own numeric values, their names,
// and the text libfabric prints for them. It is the lowest layer of
// fabricfs: core, the providers and fs all speak it, and it imports nothing
// of theirs (only core/ctl, a leaf, whose tokenizer splits a getinfo
// query). There is no cgo here; libfabric is only the reference.
//
// # Names
//
// A constant is named as in C without the "FI_" prefix, the way
// golang.org/x/sys/unix names C constants: FI_MSG is fi.MSG, FI_EP_RDM is
// fi.EP_RDM, FI_SOCKADDR_IN is fi.SOCKADDR_IN, FI_ENODATA is fi.ENODATA.
// Each constant has the type of the field it goes in (Caps, Mode, OpFlags,
// EPType...), so mixing up a capability and a mode does not compile. libfabric
// shares one 64-bit flag space among capabilities and operation flags; a bit
// that is a capability (MSG, RECV, REMOTE_CQ_DATA...) is a Caps constant even
// where it serves as an operation or completion flag, and is converted there:
// fi.OpFlags(fi.MSG | fi.RECV).
//
// # Values
//
// The values are those of libfabric 1.17's headers (rdma/fabric.h,
// fi_domain.h, fi_endpoint.h, fi_eq.h, fi_errno.h), so they can cross the
// shared-memory ring ABI and the wire unchanged and mean what libfabric's
// documentation says. A test compiles a C program against the installed
// headers and compares every constant. Error codes (Errno) below
// ERRNO_OFFSET are Linux errno values.
//
// # Text
//
// Every type prints the way libfabric's fi_tostr prints it, because fabricfs
// shows fi_info in exactly `fi_info -v`'s format: flag sets as
// "[ FI_MSG, FI_RMA ]" ("[  ]" when empty), enumerations as "FI_EP_MSG",
// Version as "1.17", TClass as "0x0", and (*Info).String is byte for byte
// fi_tostr(FI_TYPE_INFO). That fidelity includes libfabric's omissions:
// fi_tostr prints only the bits it has names for in each type (no FI_SEND in
// op_flags, no FI_AV_USER_ID in caps), and "Unknown" for enumeration values it
// does not know, so String is not always reversible; print with %#x when the
// raw value matters. Tests compare the output with the real fi_tostr and
// fi_info when they are installed.
//
// Parse reads all of these back, and more: names with or without "FI_", in any
// case, joined by ',' or '|', or numbers (decimal or 0x hex), so that a
// shell user can write "send,recv" where fi_tostr writes "[ FI_SEND, FI_RECV ]".
// ParseAddr reads addresses as "host:port", "[v6]:port" or libfabric's
// FI_ADDR_STR forms ("fi_sockaddr_in://127.0.0.1:7000", and the shm
// provider's names, "fi_shm://fabricfs.1"); ResolveAddr also
// looks host names up, under the caller's context.
//
// # fi_getinfo
//
// GetInfo is fi_getinfo(3) over the entries the providers offer
// (getinfo*.go); GetInfoText asks it a query written in fi_info(1)'s
// options and an optional hints block (ParseInfo reads what String
// prints), as the getinfo file takes them.
package fi
