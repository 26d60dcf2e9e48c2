package core

import (
	"context"
	"strings"
	"time"

	"github.com/fabricfs/fabricfs/core/ctl"
	"github.com/fabricfs/fabricfs/core/fi"
	"github.com/fabricfs/fabricfs/core/trace"
)

// command is one verb of a ctl file: for which kind, its usage, and what it
// does. Every ctl file of every object is served by this one table.
type command struct {
	kind Kind
	ctl.Cmd
	run func(c *call) error
}

// call is one command being run: the object, the caller, the arguments.
type call struct {
	ctx  context.Context
	obj  *Object
	uid  uint32
	args []string
}

func (c *call) ep() *EP   { return c.obj.Impl.(*EP) }
func (c *call) pep() *PEP { return c.obj.Impl.(*PEP) }

// ref resolves argument i as the id of an object of kind k in the domain.
func (c *call) ref(i int, k Kind) (*Object, error) {
	return c.obj.Dom.Resolve(k, c.args[i], c.uid)
}

// num parses argument i as a number.
func (c *call) num(i int) (uint64, error) {
	return ParseUint(c.args[i])
}

// ParseUint reads a number written to a file or given as a ctl argument,
// in the tree's one grammar (ctl.Uint: decimal or 0x hex); a bad number is
// fi.EINVAL.
func ParseUint(s string) (uint64, error) {
	v, err := ctl.Uint(s)
	if err != nil {
		return 0, &Error{Code: fi.EINVAL, Err: err}
	}
	return v, nil
}

// is reports whether argument i is the word w, in any case.
func (c *call) is(i int, w string) bool { return strings.EqualFold(c.args[i], w) }

// data parses optional argument i as private data.
func (c *call) data(i int) ([]byte, error) {
	if i >= len(c.args) {
		return nil, nil
	}
	return ParseData(c.args[i])
}

var commands = []command{
	{KindEP, ctl.Cmd{Verb: "bind cq", Args: "ID FLAGS", Min: 2, Max: 2}, func(c *call) error {
		o, err := c.ref(0, KindCQ)
		if err != nil {
			return err
		}
		f, err := bindFlags(c.args[1], fi.SEND|fi.RECV|fi.Caps(fi.SELECTIVE_COMPLETION))
		if err != nil {
			return err
		}
		return c.ep().BindCQ(o.Impl.(*CQ), f&fi.SEND != 0, f&fi.RECV != 0, f&fi.Caps(fi.SELECTIVE_COMPLETION) != 0)
	}},
	{KindEP, ctl.Cmd{Verb: "bind cntr", Args: "ID FLAGS", Min: 2, Max: 2}, func(c *call) error {
		o, err := c.ref(0, KindCntr)
		if err != nil {
			return err
		}
		f, err := bindFlags(c.args[1], cntrBindFlags)
		if err != nil {
			return err
		}
		return c.ep().BindCntr(o.Impl.(*Cntr), f)
	}},
	{KindEP, ctl.Cmd{Verb: "bind eq", Args: "ID", Min: 1, Max: 1}, func(c *call) error {
		o, err := c.ref(0, KindEQ)
		if err != nil {
			return err
		}
		return c.ep().BindEQ(o.Impl.(*EQ))
	}},
	{KindEP, ctl.Cmd{Verb: "bind av", Args: "ID", Min: 1, Max: 1}, func(c *call) error {
		o, err := c.ref(0, KindAV)
		if err != nil {
			return err
		}
		return c.ep().BindAV(o.Impl.(*AV))
	}},
	{KindEP, ctl.Cmd{Verb: "bind srx", Args: "ID", Min: 1, Max: 1}, func(c *call) error {
		o, err := c.ref(0, KindSRX)
		if err != nil {
			return err
		}
		return c.ep().BindSRX(o.Impl.(*SRX))
	}},
	{KindEP, ctl.Cmd{Verb: "bind stx", Args: "ID", Min: 1, Max: 1}, func(c *call) error {
		o, err := c.ref(0, KindSTX)
		if err != nil {
			return err
		}
		return c.ep().BindSTX(o.Impl.(*STX))
	}},
	{KindEP, ctl.Cmd{Verb: "enable"}, func(c *call) error { return c.ep().Enable() }},
	{KindEP, ctl.Cmd{Verb: "connect", Args: "ADDR [DATA]", Min: 1, Max: 2}, func(c *call) error {
		a, err := ParseAddr(c.ctx, c.args[0])
		if err != nil {
			return err
		}
		d, err := c.data(1)
		if err != nil {
			return err
		}
		return c.ep().Connect(a, d)
	}},
	{KindEP, ctl.Cmd{Verb: "setname", Args: "ADDR", Min: 1, Max: 1}, func(c *call) error {
		a, err := ParseAddr(c.ctx, c.args[0])
		if err != nil {
			return err
		}
		return c.ep().SetName(c.ctx, c.uid, a)
	}},
	{KindEP, ctl.Cmd{Verb: "accept", Args: "[DATA]", Max: 1}, func(c *call) error {
		d, err := c.data(0)
		if err != nil {
			return err
		}
		return c.ep().Accept(d)
	}},
	{KindEP, ctl.Cmd{Verb: "reject", Args: "[DATA]", Max: 1}, func(c *call) error {
		d, err := c.data(0)
		if err != nil {
			return err
		}
		return c.ep().Reject(d)
	}},
	{KindEP, ctl.Cmd{Verb: "shutdown"}, func(c *call) error { return c.ep().Shutdown() }},
	{KindEP, ctl.Cmd{Verb: "cancel", Args: "CONTEXT", Min: 1, Max: 1}, func(c *call) error {
		v, err := c.num(0)
		if err != nil {
			return err
		}
		return c.ep().Cancel(v)
	}},
	{KindEP, ctl.Cmd{Verb: "write", Args: "MRID OFFSET LEN RADDR KEY [DATA]", Min: 5, Max: 6}, rmaCmd(OpWrite)},
	{KindEP, ctl.Cmd{Verb: "read", Args: "MRID OFFSET LEN RADDR KEY", Min: 5, Max: 5}, rmaCmd(OpRead)},
	{KindEP, ctl.Cmd{Verb: "atomic", Args: "OP DATATYPE MRID OFFSET LEN RADDR KEY", Min: 7, Max: 7}, atomicCmd(OpAtomic)},
	{KindEP, ctl.Cmd{Verb: "fetch_atomic", Args: "OP DATATYPE MRID OFFSET LEN RESULT_MRID RESULT_OFFSET RADDR KEY", Min: 9, Max: 9},
		atomicCmd(OpFetchAtomic)},
	{KindEP, ctl.Cmd{Verb: "compare_atomic", Args: "OP DATATYPE MRID OFFSET LEN COMPARE_OFFSET RESULT_MRID RESULT_OFFSET RADDR KEY",
		Min: 10, Max: 10}, atomicCmd(OpCompareAtomic)},
	{KindEP, ctl.Cmd{Verb: "context", Args: "SEP tx|rx INDEX", Min: 3, Max: 3}, func(c *call) error {
		o, err := c.ref(0, KindEP)
		if err != nil {
			return err
		}
		dir, ok := parseCtxDir(strings.ToLower(c.args[1]))
		if !ok {
			return Errorf(fi.EINVAL, "context %q: want tx or rx", c.args[1])
		}
		idx, err := c.num(2)
		if err != nil {
			return err
		}
		return c.ep().MakeContext(o.Impl.(*EP), dir, idx)
	}},
	{KindEP, ctl.Cmd{Verb: "alias", Args: "EP FLAGS", Min: 2, Max: 2}, func(c *call) error {
		o, err := c.ref(0, KindEP)
		if err != nil {
			return err
		}
		flags, err := fi.Parse[fi.OpFlags](c.args[1])
		if err != nil {
			return Errorf(fi.EINVAL, "%w", err)
		}
		return c.ep().MakeAlias(o.Impl.(*EP), flags)
	}},
	{KindEP, ctl.Cmd{Verb: "dest", Args: "FIADDR", Min: 1, Max: 1}, func(c *call) error {
		v, err := c.num(0)
		if err != nil {
			return err
		}
		return c.ep().SetDest(v)
	}},
	{KindEP, ctl.Cmd{Verb: "tag", Args: "TAG [IGNORE] | off", Min: 1, Max: 2}, func(c *call) error {
		if c.is(0, "off") && len(c.args) == 1 {
			c.ep().ClearTag()
			return nil
		}
		var v [2]uint64
		for i := range c.args {
			var err error
			if v[i], err = c.num(i); err != nil {
				return err
			}
		}
		return c.ep().SetTag(v[0], v[1])
	}},
	{KindEP, ctl.Cmd{Verb: "src", Args: "FIADDR | any", Min: 1, Max: 1}, func(c *call) error {
		if c.is(0, "any") {
			return c.ep().SetSrc(uint64(fi.ADDR_UNSPEC))
		}
		v, err := c.num(0)
		if err != nil {
			return err
		}
		return c.ep().SetSrc(v)
	}},
	{KindEP, ctl.Cmd{Verb: "cqdata", Args: "N | off", Min: 1, Max: 1}, func(c *call) error {
		if c.is(0, "off") {
			c.ep().ClearCQData()
			return nil
		}
		v, err := c.num(0)
		if err != nil {
			return err
		}
		return c.ep().SetCQData(v)
	}},
	{KindEP, ctl.Cmd{Verb: "rxbuf", Args: "N | off", Min: 1, Max: 1}, func(c *call) error {
		if c.is(0, "off") {
			return c.ep().SetRxBuf(0)
		}
		v, err := c.num(0)
		if err != nil {
			return err
		}
		if v == 0 {
			return Errorf(fi.EINVAL, "a receive of 0 bytes; 'rxbuf off' sizes receives to the message")
		}
		return c.ep().SetRxBuf(v)
	}},
	{KindEP, ctl.Cmd{Verb: "multi_recv", Args: "MRID OFFSET LEN [CONTEXT]", Min: 3, Max: 4}, func(c *call) error {
		mr, err := c.ref(0, KindMR)
		if err != nil {
			return err
		}
		var v [3]uint64 // OFFSET LEN CONTEXT
		for i := 1; i < len(c.args); i++ {
			if v[i-1], err = c.num(i); err != nil {
				return err
			}
		}
		return c.ep().MultiRecv(mr, v[0], v[1], v[2])
	}},
	{KindEP, ctl.Cmd{Verb: "claim", Args: "KEY MRID OFFSET LEN [CONTEXT]", Min: 4, Max: 5}, func(c *call) error {
		key, err := c.num(0)
		if err != nil {
			return err
		}
		mr, err := c.ref(1, KindMR)
		if err != nil {
			return err
		}
		var v [3]uint64 // OFFSET LEN CONTEXT
		for i := 2; i < len(c.args); i++ {
			if v[i-2], err = c.num(i); err != nil {
				return err
			}
		}
		return c.ep().Claim(c.ctx, key, mr, v[0], v[1], v[2])
	}},
	{KindEP, ctl.Cmd{Verb: "discard", Args: "KEY", Min: 1, Max: 1}, func(c *call) error {
		key, err := c.num(0)
		if err != nil {
			return err
		}
		return c.ep().Claim(c.ctx, key, nil, 0, 0, 0)
	}},
	{KindEP, ctl.Cmd{Verb: "setopt", Args: "NAME VALUE", Min: 2, Max: 2}, func(c *call) error {
		v, err := c.num(1)
		if err != nil {
			return err
		}
		return c.ep().SetOpt(c.args[0], v)
	}},
	{KindEP, ctl.Cmd{Verb: "kick"}, func(c *call) error { return c.ep().Kick() }},
	{KindPEP, ctl.Cmd{Verb: "bind eq", Args: "ID", Min: 1, Max: 1}, func(c *call) error {
		o, err := c.ref(0, KindEQ)
		if err != nil {
			return err
		}
		return c.pep().BindEQ(o.Impl.(*EQ))
	}},
	{KindPEP, ctl.Cmd{Verb: "listen", Args: "[ADDR]", Max: 1}, func(c *call) error {
		if len(c.args) == 0 {
			return c.pep().Listen(c.ctx, c.uid, nil)
		}
		a, err := ParseAddr(c.ctx, c.args[0])
		if err != nil {
			return err
		}
		return c.pep().Listen(c.ctx, c.uid, &a)
	}},
	{KindSRX, ctl.Cmd{Verb: "enable"}, func(c *call) error { return c.obj.Impl.(*SRX).Enable() }},
	{KindSRX, ctl.Cmd{Verb: "kick"}, func(c *call) error { return c.obj.Impl.(*SRX).Kick() }},
	{KindSRX, ctl.Cmd{Verb: "cancel", Args: "CONTEXT", Min: 1, Max: 1}, func(c *call) error {
		v, err := c.num(0)
		if err != nil {
			return err
		}
		return c.obj.Impl.(*SRX).Cancel(v)
	}},
	{KindCQ, ctl.Cmd{Verb: "signal"}, func(c *call) error {
		c.obj.Impl.(*CQ).Signal()
		return nil
	}},
	{KindAV, ctl.Cmd{Verb: "insert", Args: "ADDR...", Min: 1, Max: -1}, func(c *call) error {
		addrs := make([]fi.Addr, len(c.args))
		for i, s := range c.args {
			a, err := ParseAddr(c.ctx, s)
			if err != nil {
				return err
			}
			addrs[i] = a
		}
		_, err := c.obj.Impl.(*AV).Insert(addrs)
		return err
	}},
	{KindAV, ctl.Cmd{Verb: "insert_id", Args: "USERID ADDR", Min: 2, Max: 2}, func(c *call) error {
		id, err := c.num(0)
		if err != nil {
			return err
		}
		a, err := ParseAddr(c.ctx, c.args[1])
		if err != nil {
			return err
		}
		_, err = c.obj.Impl.(*AV).InsertUserID(id, a)
		return err
	}},
	{KindAV, ctl.Cmd{Verb: "remove", Args: "FIADDR...", Min: 1, Max: -1}, func(c *call) error {
		for i := range c.args {
			v, err := c.num(i)
			if err != nil {
				return err
			}
			if err := c.obj.Impl.(*AV).Remove(v); err != nil {
				return err
			}
		}
		return nil
	}},
	{KindMR, ctl.Cmd{Verb: "bind eq", Args: "ID", Min: 1, Max: 1}, func(c *call) error {
		o, err := c.ref(0, KindEQ)
		if err != nil {
			return err
		}
		return c.obj.Impl.(*MR).BindEQ(o.Impl.(*EQ))
	}},
	{KindMR, ctl.Cmd{Verb: "bind cntr", Args: "ID FLAGS", Min: 2, Max: 2}, func(c *call) error {
		o, err := c.ref(0, KindCntr)
		if err != nil {
			return err
		}
		f, err := bindFlags(c.args[1], fi.REMOTE_READ|fi.REMOTE_WRITE)
		if err != nil {
			return err
		}
		return c.obj.Impl.(*MR).BindCntr(o.Impl.(*Cntr), f)
	}},
	{KindMR, ctl.Cmd{Verb: "window", Args: "MRID OFFSET LEN", Min: 3, Max: 3}, func(c *call) error {
		o, err := c.ref(0, KindMR)
		if err != nil {
			return err
		}
		off, err := c.num(1)
		if err != nil {
			return err
		}
		n, err := c.num(2)
		if err != nil {
			return err
		}
		return c.obj.Impl.(*MR).Window(o, off, n)
	}},
	{KindMR, ctl.Cmd{Verb: "reg"}, func(c *call) error { return c.obj.Impl.(*MR).Register() }},
	{KindCntr, ctl.Cmd{Verb: "add", Args: "N", Min: 1, Max: 1}, cntrOp((*Cntr).Add)},
	{KindCntr, ctl.Cmd{Verb: "set", Args: "N", Min: 1, Max: 1}, cntrOp((*Cntr).Set)},
	{KindCntr, ctl.Cmd{Verb: "adderr", Args: "N", Min: 1, Max: 1}, cntrOp((*Cntr).AddErr)},
	{KindCntr, ctl.Cmd{Verb: "seterr", Args: "N", Min: 1, Max: 1}, cntrOp((*Cntr).SetErr)},
	{KindCntr, ctl.Cmd{Verb: "wait", Args: "N [MILLISECONDS]", Min: 1, Max: 2}, func(c *call) error {
		n, err := c.num(0)
		if err != nil {
			return err
		}
		var timeout time.Duration
		if len(c.args) > 1 {
			ms, err := c.num(1)
			if err != nil {
				return err
			}
			timeout = time.Duration(min(ms, 1<<40)) * time.Millisecond
		}
		return c.obj.Impl.(*Cntr).Wait(c.ctx, n, timeout)
	}},
}

// rmaCmd runs the ctl verbs write and read: MRID OFFSET LEN RADDR KEY,
// and write's optional DATA, remote CQ data.
func rmaCmd(kind OpKind) func(c *call) error {
	return func(c *call) error {
		mr, err := c.ref(0, KindMR)
		if err != nil {
			return err
		}
		var v [5]uint64
		for i := 1; i < len(c.args); i++ {
			if v[i-1], err = c.num(i); err != nil {
				return err
			}
		}
		var data *uint64
		if len(c.args) == 6 {
			data = &v[4]
		}
		return c.ep().RMA(c.ctx, kind, mr, v[0], v[1], v[2], v[3], data)
	}
}

// atomicCmd runs the ctl verbs atomic, fetch_atomic and compare_atomic:
// OP DATATYPE (libfabric's names, with or without FI_, any case), the
// operand MRID OFFSET LEN, compare_atomic's COMPARE_OFFSET in the same
// region, fetch_atomic's and compare_atomic's RESULT_MRID RESULT_OFFSET,
// then RADDR KEY, as the ring's work requests have them (docs/abi.md). A
// fetch_atomic with FI_ATOMIC_READ reads no operand: its MRID and OFFSET
// are not looked at.
func atomicCmd(kind OpKind) func(c *call) error {
	return func(c *call) error {
		a := atomicArgs{kind: kind}
		var err error
		if a.op, err = fi.Parse[fi.AtomicOp](c.args[0]); err != nil {
			return &Error{Code: fi.EINVAL, Err: err}
		}
		if a.datatype, err = fi.Parse[fi.AtomicType](c.args[1]); err != nil {
			return &Error{Code: fi.EINVAL, Err: err}
		}
		// Each argument in turn; the first error stops the rest.
		i := 2
		num := func(v *uint64) {
			if err == nil {
				*v, err = c.num(i)
			}
			i++
		}
		mr := func(o **Object) {
			if err == nil {
				*o, err = c.ref(i, KindMR)
			}
			i++
		}
		if usesOperand(kind, a.op) {
			mr(&a.mr)
			num(&a.off)
		} else {
			i += 2
		}
		num(&a.n)
		if kind == OpCompareAtomic {
			num(&a.cmpOff)
		}
		if kind != OpAtomic {
			mr(&a.result)
			num(&a.roff)
		}
		num(&a.raddr)
		num(&a.key)
		if err != nil {
			return err
		}
		return c.ep().atomic(c.ctx, a)
	}
}

func cntrOp(f func(*Cntr, uint64)) func(c *call) error {
	return func(c *call) error {
		v, err := c.num(0)
		if err != nil {
			return err
		}
		f(c.obj.Impl.(*Cntr), v)
		return nil
	}
}

// tables are the ctl.Cmd tables per kind; Index points into commands.
var tables [NumKinds][]ctl.Cmd

func init() {
	for i, c := range commands {
		c.Cmd.Index = i
		tables[c.kind] = append(tables[c.kind], c.Cmd)
	}
}

// Usage lists the commands of kind k, one usage line each.
func Usage(k Kind) []string {
	var out []string
	for _, c := range tables[k] {
		out = append(out, c.Usage())
	}
	return out
}

// Ctl runs one control message written to the object's ctl file by uid.
// Its error says what went wrong, not which command: the caller names the
// command (fs puts the message in front of the sentence in err).
func (o *Object) Ctl(ctx context.Context, uid uint32, line string) error {
	if !o.Alive() {
		return gone(o)
	}
	words, err := ctl.Tokenize(line)
	if err != nil {
		return &Error{Code: fi.EINVAL, Err: err}
	}
	cmd, args, err := ctl.Lookup(tables[o.Kind], words)
	if err != nil {
		return &Error{Code: fi.EINVAL, Err: err}
	}
	if err := commands[cmd.Index].run(&call{ctx: ctx, obj: o, uid: uid, args: args}); err != nil {
		return err
	}
	if trace.On(trace.Object) {
		o.traceCtl(cmd.Verb, args)
	}
	return nil
}

// bindFlags parses the FLAGS of a bind command: libfabric names with or
// without FI_, any case, joined by ',' or '|'; "transmit" is FI_SEND and
// "selective" FI_SELECTIVE_COMPLETION. Only bits in allowed are accepted.
func bindFlags(s string, allowed fi.Caps) (fi.Caps, error) {
	var v fi.Caps
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '|' }) {
		name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(w)), "FI_")
		var bit fi.Caps
		switch name {
		case "SEND", "TRANSMIT":
			bit = fi.SEND
		case "RECV":
			bit = fi.RECV
		case "SELECTIVE", "SELECTIVE_COMPLETION":
			bit = fi.Caps(fi.SELECTIVE_COMPLETION)
		case "READ":
			bit = fi.READ
		case "WRITE":
			bit = fi.WRITE
		case "REMOTE_READ":
			bit = fi.REMOTE_READ
		case "REMOTE_WRITE":
			bit = fi.REMOTE_WRITE
		}
		if bit == 0 || bit&allowed == 0 {
			return 0, Errorf(fi.EINVAL, "bad bind flag %q", w)
		}
		v |= bit
	}
	if v == 0 {
		return 0, Errorf(fi.EINVAL, "no bind flags in %q", s)
	}
	return v, nil
}
