package core

import (
	"strings"

	"github.com/fabricfs/fabricfs/core/fi"
)

// opClass is a class of operations as fi_ep_bind's flags name them: the
// unit of a counter binding, and of the CQ binding's direction.
type opClass int

const (
	classSend        opClass = iota // messages the endpoint sends
	classRecv                       // messages it receives
	classRead                       // RMA reads, fetch and compare atomics it initiates
	classWrite                      // RMA writes and base atomics it initiates
	classRemoteRead                 // RMA reads, fetch and compare atomics other endpoints make of its memory
	classRemoteWrite                // RMA writes and base atomics other endpoints make to it
	numClasses
)

// classes gives each class its bind flag, its name (ep/N/cntr_NAME) and
// whether its completions go to the receive side's CQ (fi_ep_bind: the
// FI_RECV binding "automatically includes FI_REMOTE_WRITE").
var classes = [numClasses]struct {
	flag fi.Caps
	name string
	rx   bool
}{
	classSend:        {fi.SEND, "send", false},
	classRecv:        {fi.RECV, "recv", true},
	classRead:        {fi.READ, "read", false},
	classWrite:       {fi.WRITE, "write", false},
	classRemoteRead:  {fi.REMOTE_READ, "remote_read", true},
	classRemoteWrite: {fi.REMOTE_WRITE, "remote_write", true},
}

// cntrBindFlags are the flags `bind cntr` takes.
const cntrBindFlags = fi.SEND | fi.RECV | fi.READ | fi.WRITE | fi.REMOTE_READ | fi.REMOTE_WRITE

// class is the class of an operation of kind k. The atomics count as
// fi_ep_bind(3) says: FI_WRITE counts "an RMA write or base atomic
// operation", FI_READ "an RMA read, atomic fetch, or atomic compare
// operation" initiated from the endpoint.
func (k OpKind) class() opClass {
	switch k {
	case OpRecv, OpTRecv:
		return classRecv
	case OpRead, OpFetchAtomic, OpCompareAtomic:
		return classRead
	case OpWrite, OpAtomic:
		return classWrite
	}
	return classSend
}

// BindCntr is fi_ep_bind of a counter, for the classes in flags (fi.SEND,
// fi.RECV, fi.READ, fi.WRITE, fi.REMOTE_READ, fi.REMOTE_WRITE). "An
// endpoint may only be bound to a single CQ or counter for a given type of
// operation": a second counter for a class is fi.EINVAL, as libfabric's
// ofi_ep_bind_cntr returns.
func (e *EP) BindCntr(c *Cntr, flags fi.Caps) error {
	if flags == 0 || flags&^cntrBindFlags != 0 {
		return Errorf(fi.EINVAL, "bind cntr takes send, recv, read, write, remote_read, remote_write")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.idleLocked("bind"); err != nil {
		return err
	}
	for i, cl := range classes {
		if flags&cl.flag != 0 && e.cntrs[i] != nil {
			return Errorf(fi.EINVAL, "%s is already bound for %s", e.cntrs[i].obj, cl.name)
		}
	}
	for i, cl := range classes {
		if flags&cl.flag != 0 {
			if err := c.bind(); err != nil {
				return err
			}
			e.cntrs[i] = c
		}
	}
	return nil
}

// cntrFieldLocked is the counters' field of the status: in the line
// "send:ID,recv:ID" (the bound ones) or "-"; in JSON every class's ID or null.
func (e *EP) cntrFieldLocked() Field {
	var b []string
	ids := make(Record, numClasses)
	for i, c := range e.cntrs {
		ids[i] = Field{Key: classes[i].name}
		if c != nil {
			b = append(b, classes[i].name+":"+c.obj.ID)
			ids[i].JSON = c.obj.ID
		}
	}
	text := strings.Join(b, ",")
	if len(b) == 0 {
		text = "-"
	}
	return Field{Key: "cntr", JSON: ids, Text: text}
}
