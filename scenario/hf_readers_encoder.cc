// config.json readers for the encoders: BERT and ViT.
#include "scenario/hf_readers.h"

namespace oomcast::scenario::hf {

void read_bert(HfConfigFields& fields, ModelConfig& model) {
  model.family = "bert";
  read_transformer_dims(fields, model);
  model.dims["vocab"] = fields.required_int("vocab_size");
  model.dims["max_positions"] = fields.optional_int("max_position_embeddings", 512);
  model.dims["type_vocab"] = fields.optional_int("type_vocab_size", 2);
  fields.expect_string("hidden_act", {"gelu"});
  fields.expect_string("position_embedding_type", {"absolute"});
  if (fields.optional_bool("is_decoder", false)) fields.note_unmodelled("is_decoder", "planned as an encoder");
  if (fields.optional_bool("add_cross_attention", false)) {
    fields.note_unmodelled("add_cross_attention", "the cross-attention blocks are not planned");
  }
}

void read_vit(HfConfigFields& fields, ModelConfig& model) {
  // HF ViT differs from torchvision's layout (separate q/k/v, a pooler); counted as torchvision.
  model.family = "vit";
  read_transformer_dims(fields, model);
  model.dims["image_size"] = fields.optional_int("image_size", 224);
  model.dims["patch_size"] = fields.optional_int("patch_size", 16);
  model.dims["channels"] = fields.optional_int("num_channels", 3);
  fields.expect_string("hidden_act", {"gelu"});
  if (!fields.optional_bool("qkv_bias", true)) fields.note_unmodelled("qkv_bias", "planned with q/k/v biases");
  fields.read("encoder_stride");  // only ViTForMaskedImageModeling's decoder reads it
  fields.read("id2label");
  int64_t labels = 1000;
  if (fields.has("id2label")) labels = static_cast<int64_t>(fields.json_size("id2label"));
  model.dims["num_classes"] = labels > 0 ? labels : 1000;
}

}  // namespace oomcast::scenario::hf
