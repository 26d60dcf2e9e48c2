package core

// OpsSet is one set of provider-specific operations of a domain or an
// endpoint, what fi_open_ops(3) opens by name: "Provider interfaces may be
// used to access low-level resources and operations that are specific to
// the opened resource domain." Its name follows libfabric's ops names (a
// lower-case word with a version, "tcp_sockopt_v1"); its values are the
// files of ops/NAME/, read with Get and, where Set is given, written.
type OpsSet struct {
	Name   string
	Values []Attr
}

// OpsOpener is an optional interface of a ProviderDomain or an Endpoint
// with provider-specific operations: the sets it offers, in the order
// ops/ lists them.
type OpsOpener interface {
	Ops() []OpsSet
}

// Ops are the domain's provider-specific operation sets; none if its
// provider has none.
func (d *Domain) Ops() []OpsSet {
	if o, ok := d.prov.(OpsOpener); ok {
		return o.Ops()
	}
	return nil
}

// Ops are the endpoint's provider-specific operation sets: its provider
// endpoint's, once enabled (there is no provider endpoint before); none
// before and after close.
func (e *EP) Ops() []OpsSet {
	e.mu.Lock()
	p, closed := e.prov, e.state == stateClosed
	e.mu.Unlock()
	if o, ok := p.(OpsOpener); ok && !closed {
		return o.Ops()
	}
	return nil
}

// FindOps returns the set called name among sets.
func FindOps(sets []OpsSet, name string) (OpsSet, bool) {
	for _, s := range sets {
		if s.Name == name {
			return s, true
		}
	}
	return OpsSet{}, false
}
