//go:build !(vulkan && cgo)

package gpu

import "github.com/spoolhq/spool/kernels"

// Device is unavailable in this build; Open always fails.
type Device struct{}

// Open returns ErrUnavailable: this build has no Vulkan backend.
func Open(Options) (*Device, error) { return nil, ErrUnavailable }

// The methods below exist so that callers compile in every build; a nil
// *Device is never returned by Open here, so they are never reached.

func (d *Device) Info() Info                    { return Info{} }
func (d *Device) Times() Times                  { return Times{} }
func (d *Device) Close()                        {}
func (d *Device) Keep(...*kernels.Matrix) error { return ErrUnavailable }
func (d *Device) SetLimits(int64, int64)        {}
func (d *Device) SetResidentExperts(int64)      {}
func (d *Device) ResidentExperts() (int, int64) { return 0, 0 }
func (d *Device) MatMul(_ []float32, _ *kernels.Matrix, _ []float32, _ int) error {
	return ErrUnavailable
}
func (d *Device) MatMulMany(_ []float32, _ int, _ []*kernels.Matrix, _ [][]float32) error {
	return ErrUnavailable
}
func (d *Device) MLP(_ []float32, _ *MLP, _ []float32, _ int) error { return ErrUnavailable }
func (d *Device) MoE(_, _ []float32, _ int, _ *MoE, _ Fetch) (Routes, error) {
	return Routes{}, ErrUnavailable
}
func (d *Device) Attention(_ []float32, _ *Attention) error { return ErrUnavailable }
