package capture

import "context"

type effectKeyCtx struct{}

// WithEffectKey returns ctx carrying the idempotency key of the effect step
// whose phone operations run under it. A Runner sets it for steps marked as
// effects; devices may record it (the simulated phone counts operations by
// key).
func WithEffectKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, effectKeyCtx{}, key)
}

// EffectKey returns the effect key carried by ctx, "" when none.
func EffectKey(ctx context.Context) string {
	k, _ := ctx.Value(effectKeyCtx{}).(string)
	return k
}
