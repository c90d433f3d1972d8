// Choices a model exposes to its configuration, as types: the configuration
// layer (config/) resolves YAML strings into these once, so that no model or
// trainer code compares strings.
#pragma once

namespace mpb {

// Gradient checkpointing (BERT): which layer outputs are kept for the
// backward pass; the rest are recomputed segment by segment.
enum class CheckpointPolicy {
  Off,         // keep every activation
  EveryLayer,  // keep each layer's input; recompute one layer at a time
  EveryK,      // segments of k layers
  Sqrt,        // segments of ceil(sqrt(layers)) layers
};

// The policy's name in the configuration and in messages: "off", "every_layer",
// "every_k", "sqrt" (the schema, config/schema.cpp, reads these).
inline const char* checkpoint_policy_name(CheckpointPolicy policy) {
  switch (policy) {
    case CheckpointPolicy::Off: return "off";
    case CheckpointPolicy::EveryLayer: return "every_layer";
    case CheckpointPolicy::EveryK: return "every_k";
    case CheckpointPolicy::Sqrt: return "sqrt";
  }
  return "?";
}

// BERT's MLM head: which positions the transform and the tied decoder run on.
enum class MlmHead {
  Sparse,  // only the masked positions (gathered first), as NVIDIA's BERT does
  Dense,   // every position (the loss then ignores the unmasked ones)
};

// "sparse", "dense": the configuration's names (model.mlm_head).
inline const char* mlm_head_name(MlmHead head) { return head == MlmHead::Sparse ? "sparse" : "dense"; }

}  // namespace mpb
