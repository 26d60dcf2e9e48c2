package fi

// withShm is testOffered with a named entry after it, as the shm
// provider offers: FI_EP_RDM, FI_ADDR_STR, no IP address.
func withShm() []*Info {
	o := testOffered()
	shm := o[0].Clone()
	shm.EPAttr.Type, shm.AddrFormat, shm.SrcAddr = EP_RDM, ADDR_STR, nil
	shm.DomainAttr.Name, shm.FabricAttr.Name, shm.FabricAttr.ProvName = "shm", "shm", "shm"
	return append(o, shm)
}

var getinfoAddrTests = []getinfoCase{
	// Named entries (fi_shm://NAME).
	{
		name:    "named entry takes a named dest_addr",
		quote:   "FI_ADDR_STR: Address is a formatted character string.",
		offered: withShm,
		hints:   &Info{AddrFormat: ADDR_STR, DestAddr: &Addr{Format: ADDR_STR, Str: "fi_shm://fabricfs.2"}},
		want:    []string{"shm shm rdm"},
		check: each(func(in *Info) string {
			return expectAddr("dest", in.DestAddr, "fi_shm://fabricfs.2") + expectAddr("src", in.SrcAddr, "")
		}),
	},
	{
		// libfabric's shm makes a name of them (smr_resolve_addr), which
		// fabtests' getinfo_no_hints5 asks for.
		name:    "named entry makes a name of node and service",
		quote:   "If node is provided, fi_getinfo will attempt to resolve the fabric address to the given node.",
		offered: withShm,
		node:    "127.0.0.1", service: "7000", hints: &Info{FabricAttr: &FabricAttr{ProvName: "shm"}},
		want: []string{"shm shm rdm"},
		check: each(func(in *Info) string {
			return expectAddr("dest", in.DestAddr, "fi_ns://127.0.0.1:7000") + expectAddr("src", in.SrcAddr, "")
		}),
	},
	{
		name:    "named entry makes a name of a service alone",
		quote:   "If node is provided, fi_getinfo will attempt to resolve the fabric address to the given node.",
		offered: withShm,
		service: "7000", hints: &Info{FabricAttr: &FabricAttr{ProvName: "shm"}},
		want: []string{"shm shm rdm"},
		check: each(func(in *Info) string {
			return expectAddr("dest", in.DestAddr, "fi_ns://7000")
		}),
	},
	{
		// fabtests' servers: fi_getinfo(NODE, SERVICE, FI_SOURCE), an
		// endpoint of the answer, found by its clients at the same name.
		name:    "named entry makes its src_addr of FI_SOURCE node and service",
		quote:   "FI_SOURCE: Indicates that the node and service parameters specify the local source address to associate with an endpoint.",
		offered: withShm,
		flags:   uint64(SOURCE), node: "127.0.0.1", service: "7000", hints: &Info{FabricAttr: &FabricAttr{ProvName: "shm"}},
		want: []string{"shm shm rdm"},
		check: each(func(in *Info) string {
			return expectAddr("src", in.SrcAddr, "fi_ns://127.0.0.1:7000") + expectAddr("dest", in.DestAddr, "")
		}),
	},
	{
		name:    "named entry takes an FI_ADDR_STR node as its src_addr",
		quote:   "Applications may also pass in an FI_ADDR_STR formatted address (see format details below) as the node parameter.",
		offered: withShm,
		flags:   uint64(SOURCE), node: "fi_shm://mine", hints: &Info{FabricAttr: &FabricAttr{ProvName: "shm"}},
		want: []string{"shm shm rdm"},
		check: each(func(in *Info) string {
			return expectAddr("src", in.SrcAddr, "fi_shm://mine") + expectAddr("dest", in.DestAddr, "")
		}),
	},
	{
		name:    "named entry has no socket format",
		quote:   "addr_format - If specified, indicates the format of addresses referenced by the fabric interfaces and data structures.",
		offered: withShm,
		hints:   &Info{AddrFormat: SOCKADDR_IN, FabricAttr: &FabricAttr{ProvName: "shm"}},
		err:     ENODATA, errText: "addr_format FI_SOCKADDR_IN",
	},
	// Node and service.
	{
		name:  "FI_SOURCE node and service",
		quote: "FI_SOURCE: Indicates that the node and service parameters specify the local source address to associate with an endpoint.",
		flags: uint64(SOURCE), node: "10.0.0.5", service: "7000",
		want: ethAll,
		check: each(func(in *Info) string {
			return expectAddr("src", in.SrcAddr, "fi_sockaddr_in://10.0.0.5:7000") + expectAddr("dest", in.DestAddr, "")
		}),
	},
	{
		name:  "FI_SOURCE service only",
		quote: "FI_SOURCE: This flag is often used with passive endpoints.",
		flags: uint64(SOURCE), service: "7000", hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}, FabricAttr: &FabricAttr{ProvName: "tcp"}},
		want: []string{"tcp lo msg", "tcp eth0 msg", "tcp v6 msg"},
		check: func(out []*Info) string {
			return expectAddr("lo src", out[0].SrcAddr, "fi_sockaddr_in://0.0.0.0:7000") +
				expectAddr("v6 src", out[2].SrcAddr, "fi_sockaddr_in6://[::]:7000")
		},
	},
	{
		name:  "FI_SOURCE address of no domain",
		quote: "src_addr: On output a provider shall return an address that corresponds to the indicated fabric, domain, node, and/or service fields.",
		flags: uint64(SOURCE), node: "192.0.2.1",
		err: ENODATA, errText: "source address 192.0.2.1",
	},
	{
		name:  "node is the destination",
		quote: "If node is provided, fi_getinfo will attempt to resolve the fabric address to the given node.",
		node:  "127.0.0.1", service: "7000",
		want: loIDs,
		check: each(func(in *Info) string {
			return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://127.0.0.1:7000") +
				expectAddr("src", in.SrcAddr, "fi_sockaddr_in://127.0.0.1:0")
		}),
	},
	{
		name:  "remote node from eth0",
		quote: "dest_addr: If FI_SOURCE is not specified, on output a provider shall return an address the corresponds to the indicated node and/or service fields, relative to the fabric and domain.",
		node:  "192.0.2.1", service: "7000",
		want: ethAll,
	},
	{
		name:    "service only",
		quote:   "Service is usually associated with a transport address (such as a TCP port number).",
		service: "7000", hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}},
		offered: func() []*Info {
			o := testOffered()
			six := o[4].Clone()
			six.DomainAttr.Name = "lo6"
			six.SrcAddr = addr("[::1]:0")
			return append(o, six)
		},
		want: []string{"tcp lo msg", "tcp lo6 msg"},
		check: func(out []*Info) string {
			return expectAddr("lo dest", out[0].DestAddr, "fi_sockaddr_in://127.0.0.1:7000") +
				expectAddr("lo6 dest", out[1].DestAddr, "fi_sockaddr_in6://[::1]:7000")
		},
	},
	{
		name:  "service by name",
		quote: "service: Optional, service name or port number of address.",
		node:  "127.0.0.1", service: "http", hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg"},
		check: each(func(in *Info) string { return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://127.0.0.1:80") }),
	},
	{
		name:  "unknown service",
		quote: "service: Optional, service name or port number of address.",
		node:  "127.0.0.1", service: "nosuchservice",
		err: ENODATA, errText: "nosuchservice",
	},
	{
		name:  "port out of range",
		quote: "Service is usually associated with a transport address (such as a TCP port number).",
		node:  "127.0.0.1", service: "70000",
		err: EINVAL,
	},
	{
		name:  "name resolution",
		quote: "Node is commonly used to provide a network address (such as an IP address) or hostname.",
		node:  "localhost", hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}},
		offered: func() []*Info {
			o := testOffered()
			o[4].SrcAddr = addr("[::1]:0")
			return o
		},
		want: []string{"tcp lo msg", "tcp v6 msg"},
		check: func(out []*Info) string {
			return expectAddr("dest", out[0].DestAddr, "fi_sockaddr_in://127.0.0.1:0") +
				expectAddr("v6 dest", out[1].DestAddr, "fi_sockaddr_in6://[::1]:0")
		},
	},
	{
		name:  "resolved IPv4-mapped",
		quote: "Node and service parameters may be mapped by providers to native fabric addresses.",
		node:  "node7", service: "7000", hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp eth0 msg", "verbs rxe0 msg"},
		check: each(func(in *Info) string { return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://10.0.0.7:7000") }),
	},
	{
		name:  "no such host",
		quote: "FI_ENODATA Indicates that no providers could be found which support the requested fabric information.",
		node:  "no.such.host",
		err:   ENODATA, errText: "no.such.host",
	},
	{
		name:  "numeric host",
		quote: "FI_NUMERICHOST: Indicates that the node parameter is a numeric string representation of a fabric address, such as a dotted decimal IP address.",
		node:  "10.0.0.7", flags: uint64(NUMERICHOST), hints: &Info{EPAttr: &EPAttr{Type: EP_MSG}},
		want: []string{"tcp eth0 msg", "verbs rxe0 msg"},
	},
	{
		name:  "numeric host required",
		quote: "FI_NUMERICHOST: Use of this flag will suppress any lengthy name resolution protocol.",
		node:  "localhost", flags: uint64(NUMERICHOST),
		err: EINVAL, errText: "not a numeric address",
	},
	{
		name:  "numeric IPv6 in brackets",
		quote: "FI_NUMERICHOST: Indicates that the node parameter is a numeric string representation of a fabric address",
		node:  "[fd00::5]", flags: uint64(NUMERICHOST | SOURCE),
		want:  []string{"tcp v6 msg"},
		check: each(func(in *Info) string { return expectAddr("src", in.SrcAddr, "fi_sockaddr_in6://[fd00::5]:0") }),
	},
	{
		name:  "FI_ADDR_STR node",
		quote: "Applications may also pass in an FI_ADDR_STR formatted address (see format details below) as the node parameter.",
		node:  "fi_sockaddr_in://127.0.0.1:7000",
		want:  loIDs,
		check: each(func(in *Info) string {
			return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://127.0.0.1:7000") + expect("format", in.AddrFormat, SOCKADDR_IN)
		}),
	},
	{
		name:  "FI_ADDR_STR node with service",
		quote: "In such cases, the service parameter must be NULL.",
		node:  "fi_sockaddr_in://127.0.0.1:7000", service: "7001",
		err: EINVAL,
	},
	{
		name:  "FI_ADDR_STR bad node",
		quote: "FI_ADDR_STR: address_format[://[node][:[service][/[field3]...][?[key=value][&k2=v2]...]]]",
		node:  "fi_addr_psmx2://1234",
		err:   EINVAL,
	},
	{
		name:  "FI_ADDR_STR format",
		quote: "FI_ADDR_STR Address is a formatted character string.",
		node:  "fi_sockaddr_in6://[fd00::7]:7000", hints: &Info{AddrFormat: ADDR_STR},
		want: []string{"tcp v6 msg"},
		check: each(func(in *Info) string {
			return expect("format", in.AddrFormat, ADDR_STR) + expectAddr("dest", in.DestAddr, "fi_sockaddr_in6://[fd00::7]:7000") +
				expect("dest format", in.DestAddr.Format, ADDR_STR) + expect("src format", in.SrcAddr.Format, ADDR_STR)
		}),
	},
	{
		name:  "IPv6 format",
		quote: "FI_SOCKADDR_IN6 Address is of type sockaddr_in6 (IPv6).",
		hints: &Info{AddrFormat: SOCKADDR_IN6},
		want:  []string{"tcp v6 msg"},
	},
	{
		name:  "IPv4 format",
		quote: "FI_SOCKADDR_IN Address is of type sockaddr_in (IPv4).",
		hints: &Info{AddrFormat: SOCKADDR_IN, EPAttr: &EPAttr{Type: EP_MSG}},
		want:  []string{"tcp lo msg", "tcp eth0 msg", "verbs rxe0 msg"},
	},
	{
		name:  "IPv4 format, IPv6 node",
		quote: "addr_format: If specified, indicates the format of addresses referenced by the fabric interfaces and data structures.",
		hints: &Info{AddrFormat: SOCKADDR_IN}, node: "fd00::7",
		err: ENODATA, errText: "destination fd00::7",
	},
	{
		name:  "sockaddr format",
		quote: "FI_SOCKADDR Address is of type sockaddr. The specific socket address format will be determined at run time by interfaces examining the sa_family field.",
		hints: &Info{AddrFormat: SOCKADDR},
		want:  modeless,
	},
	{
		name:  "other formats",
		quote: "A provider may support one or more of the following addressing formats.",
		hints: &Info{AddrFormat: SOCKADDR_IB},
		err:   ENODATA, errText: "addr_format FI_SOCKADDR_IB",
	},
	{
		name:  "hints src_addr",
		quote: "src_addr - source address: If specified, indicates the source address.",
		hints: &Info{SrcAddr: addr("10.0.0.5:7000")},
		want:  ethIDs,
		check: each(func(in *Info) string { return expectAddr("src", in.SrcAddr, "fi_sockaddr_in://10.0.0.5:7000") }),
	},
	{
		name:  "hints src_addr ignored with FI_SOURCE",
		quote: "src_addr: This field will be ignored in hints if FI_SOURCE flag is set.",
		flags: uint64(SOURCE), node: "127.0.0.1", hints: &Info{SrcAddr: addr("10.0.0.5:7000")},
		want: loIDs,
	},
	{
		name:  "hints dest_addr",
		quote: "dest_addr: This field will be ignored in hints unless the node and service parameters are NULL or FI_SOURCE flag is set.",
		hints: &Info{DestAddr: addr("10.0.0.9:7000")},
		want:  ethIDs,
		check: each(func(in *Info) string {
			return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://10.0.0.9:7000") + expectAddr("src", in.SrcAddr, "fi_sockaddr_in://10.0.0.5:0")
		}),
	},
	{
		name:  "hints dest_addr ignored with node",
		quote: "dest_addr: This field will be ignored in hints unless the node and service parameters are NULL or FI_SOURCE flag is set.",
		node:  "127.0.0.1", hints: &Info{DestAddr: addr("10.0.0.9:7000")},
		want:  loIDs,
		check: each(func(in *Info) string { return expectAddr("dest", in.DestAddr, "fi_sockaddr_in://127.0.0.1:0") }),
	},
	{
		name:  "hints dest_addr with FI_SOURCE",
		quote: "dest_addr: This field will be ignored in hints unless the node and service parameters are NULL or FI_SOURCE flag is set.",
		flags: uint64(SOURCE), node: "127.0.0.1", service: "7000", hints: &Info{DestAddr: addr("127.0.0.1:7001")},
		want: loIDs,
		check: each(func(in *Info) string {
			return expectAddr("src", in.SrcAddr, "fi_sockaddr_in://127.0.0.1:7000") + expectAddr("dest", in.DestAddr, "fi_sockaddr_in://127.0.0.1:7001")
		}),
	},
	{
		name:  "hints address without IP",
		quote: "src_addrlen: This value must be > 0 if src_addr is non-NULL.",
		hints: &Info{SrcAddr: &Addr{Format: SOCKADDR_IN}},
		err:   EINVAL,
	},
}
