//go:build vulkan && cgo

package gpu

/*
#include "vk.h"
*/
import "C"

// Resident experts: on a device with memory of its own, the hottest
// routed experts stay in device memory between forwards, up to
// Options.ResidentExpertBytes (a line of the memory plan, sized from the
// device's free memory). A resident expert is applied from there with no
// copy; another is copied into the bank and, on the way, into a free
// slot, or into the slot of a resident expert used less often (never one
// the running layer uses). Uses are counted per layer and expert over
// every MoE call.

// residentKey names a routed expert: its layer (the layer's MoE, which
// the caller keeps for the device's lifetime) and id.
type residentKey struct {
	layer *MoE
	id    int
}

// residentSlab is a device buffer of equal slots for experts of one size.
type residentSlab struct {
	buf   *buffer
	slot  int64 // bytes a slot
	slots []residentKey
	used  []bool
}

// residentPlace is where a resident expert lies: its slab and slot.
type residentPlace struct {
	slab, slot int
	place      expertPlace // offsets within the slot
}

// residentStore is the device's resident experts.
type residentStore struct {
	limit int64 // Options.ResidentExpertBytes
	bytes int64 // allocated slabs
	slabs []*residentSlab
	at    map[residentKey]residentPlace
	uses  map[residentKey]uint32
}

// residentSlabBytes bounds one slab (a binding of the batched products).
const residentSlabBytes = 1 << 30

// noteUses counts one use of each expert of the layer's union.
func (s *residentStore) noteUses(l *MoE, union []int) {
	if s.limit <= 0 {
		return
	}
	if s.uses == nil {
		s.uses = map[residentKey]uint32{}
		s.at = map[residentKey]residentPlace{}
	}
	for _, id := range union {
		s.uses[residentKey{l, id}]++
	}
}

// lookup returns where expert (l, id) is resident.
func (s *residentStore) lookup(l *MoE, id int) (residentPlace, bool) {
	p, ok := s.at[residentKey{l, id}]
	return p, ok
}

// admit finds a slot of size bytes for expert k: a free one (growing the
// store by a slab while the limit allows), else the slot of the least used
// resident expert of that size outside the running layer's union (users)
// when k is used more often. It returns the slab and slot, and ok false
// where k stays out.
func (d *Device) admit(k residentKey, size int64, users map[int][]int32) (int, int, bool) {
	s := &d.resident
	if s.limit < size {
		return 0, 0, false
	}
	for i, sl := range s.slabs {
		if sl.slot != size {
			continue
		}
		for j, u := range sl.used {
			if !u {
				return i, j, true
			}
		}
	}
	if s.bytes+size <= s.limit {
		n := max(1, min(residentSlabBytes, d.maxRange, s.limit-s.bytes)/size)
		if buf, err := d.newBuffer(n*size, C.SPOOL_MEM_DEVICE); err == nil {
			s.bytes += buf.size
			s.slabs = append(s.slabs, &residentSlab{buf: buf, slot: size, slots: make([]residentKey, n), used: make([]bool, n)})
			return len(s.slabs) - 1, 0, true
		}
	}
	best, bi, bj := s.uses[k], -1, -1
	for i, sl := range s.slabs {
		if sl.slot != size {
			continue
		}
		for j, v := range sl.slots {
			if _, running := users[v.id]; running && v.layer == k.layer {
				continue
			}
			if u := s.uses[v]; u < best {
				best, bi, bj = u, i, j
			}
		}
	}
	if bi < 0 {
		return 0, 0, false
	}
	delete(s.at, s.slabs[bi].slots[bj])
	s.slabs[bi].used[bj] = false
	return bi, bj, true
}

// keepResident records copying expert m of the batch being recorded from
// the bank into a resident slot, where the store takes it: it is resident
// from the next layer on. Only a copy recorded after the batch's first
// barrier: earlier work reading the slot is done.
func (g *groups) keepResident(m member) error {
	d := g.o.d
	k := residentKey{g.layer, m.id}
	i, j, ok := d.admit(k, g.need, g.users)
	if !ok {
		return nil
	}
	sl := d.resident.slabs[i]
	src := int64(g.cur)*g.half + m.place.data[0]
	dst := int64(j) * sl.slot
	if rc := C.spool_vk_copy(d.v, d.bank.b, C.uint64_t(src), sl.buf.b, C.uint64_t(dst), C.uint64_t(g.need)); rc != 0 {
		return d.lastError("copy", rc)
	}
	var p expertPlace
	for t := range 3 {
		p.data[t] = m.place.data[t] - m.place.data[0]
		p.scales[t] = m.place.scales[t] - m.place.data[0]
	}
	sl.slots[j], sl.used[j] = k, true
	d.resident.at[k] = residentPlace{slab: i, slot: j, place: p}
	return nil
}

// freeResident releases the slabs.
func (d *Device) freeResident() {
	for _, sl := range d.resident.slabs {
		d.freeBuffer(sl.buf)
	}
	d.resident = residentStore{}
}
