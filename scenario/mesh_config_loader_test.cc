// The model-parallel keys of `parallel:` (tensor, sequence, pipeline, context, expert
// parallelism and HSDP replicas): what they read, Megatron-LM's spellings, and every refusal
// naming its key (world size not divisible by the mesh, heads or KV heads not divisible by TP,
// fewer layers than stages, ...).
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "scenario/scenario_loader.h"

using namespace oomcast;
using namespace oomcast::scenario;

namespace {

// llama-3-8b: 32 layers, 32 heads, 8 KV heads, ffn 14336, vocab 128256.
Scenario load(const std::string& parallel, const std::string& model = "llama-3-8b", const std::string& extra = "") {
  return load_scenario_text("model: " + model + "\nbatch_size: 1\nseq_len: 4096\n" + extra + "parallel: " + parallel +
                                "\n",
                            "x.yaml");
}

}  // namespace

TEST_CASE("tensor_parallel and sequence_parallel are read, with vocab-parallel embedding by default",
          "[parallel][loader][mesh]") {
  Scenario s = load("{world_size: 64, engine: fsdp2, tensor_parallel: 8, sequence_parallel: true}");
  CHECK(s.parallel.mesh.tensor_parallel == 8);
  CHECK(s.parallel.mesh.sequence_parallel);
  CHECK(s.parallel.mesh.vocab_parallel);
  CHECK(s.parallel.data_parallel_shard() == 8);
}

TEST_CASE("Megatron-LM's names set the same degrees", "[parallel][loader][mesh]") {
  Scenario s = load("{world_size: 64, engine: ddp, tensor_model_parallel_size: 4, pipeline_model_parallel_size: 4, "
                    "context_parallel_size: 2, virtual_pipeline_model_parallel_size: 2, "
                    "pipeline_schedule: interleaved_1f1b}",
                    "llama-3-8b", "attention: mem_efficient\n");
  CHECK(s.parallel.mesh.tensor_parallel == 4);
  CHECK(s.parallel.mesh.pipeline_parallel == 4);
  CHECK(s.parallel.mesh.context_parallel == 2);
  CHECK(s.parallel.mesh.pipeline_virtual_stages == 2);
  CHECK(s.parallel.data_parallel_shard() == 2 * 2);  // 64 / (4 x 4 x 2) = 2 data-parallel shards x cp 2
}

TEST_CASE("a degree given under both spellings is refused at the second", "[parallel][loader][mesh]") {
  CHECK_THROWS_WITH(load("{world_size: 8, tensor_parallel: 8, tensor_model_parallel_size: 8}"),
                    Catch::Contains("parallel.tensor_model_parallel_size") && Catch::Contains("same degree"));
}

TEST_CASE("a world size the mesh does not divide is refused at world_size", "[parallel][loader][mesh]") {
  CHECK_THROWS_WITH(load("{world_size: 12, tensor_parallel: 8}"),
                    Catch::Contains("parallel.world_size") && Catch::Contains("not divisible by the mesh"));
}

TEST_CASE("tensor parallelism that does not divide the heads or the KV heads is refused at its key",
          "[parallel][loader][mesh]") {
  CHECK_THROWS_WITH(load("{world_size: 48, tensor_parallel: 3}", "{preset: llama-3-8b, vocab: 128259, ffn_hidden: 14337}"),
                    Catch::Contains("parallel.tensor_parallel") && Catch::Contains("heads (32)"));
  CHECK_THROWS_WITH(load("{world_size: 16, tensor_parallel: 16}"),
                    Catch::Contains("parallel.tensor_parallel") && Catch::Contains("kv_heads (8)"));
}

TEST_CASE("more pipeline stages than layers are refused at pipeline_parallel", "[parallel][loader][mesh]") {
  CHECK_THROWS_WITH(load("{world_size: 64, pipeline_parallel: 64}"),
                    Catch::Contains("parallel.pipeline_parallel") && Catch::Contains("more than the model's 32 layers"));
}

TEST_CASE("layers per stage must list every stage and add up to the model's layers", "[parallel][loader][mesh]") {
  Scenario s = load("{world_size: 4, pipeline_parallel: 4, pipeline_layers_per_stage: [7, 9, 9, 7]}");
  CHECK(s.parallel.mesh.layers_per_stage == std::vector<int64_t>{7, 9, 9, 7});
  CHECK_THROWS_WITH(load("{world_size: 4, pipeline_parallel: 4, pipeline_layers_per_stage: [8, 8, 8]}"),
                    Catch::Contains("parallel.pipeline_layers_per_stage") && Catch::Contains("lists 3 stages"));
  CHECK_THROWS_WITH(load("{world_size: 4, pipeline_parallel: 4, pipeline_layers_per_stage: [8, 8, 8, 9]}"),
                    Catch::Contains("adds up to 33 layers"));
}

TEST_CASE("1F1B with fewer microbatches than stages is refused at pipeline_microbatches", "[parallel][loader][mesh]") {
  CHECK_THROWS_WITH(load("{world_size: 4, pipeline_parallel: 4, pipeline_microbatches: 2}"),
                    Catch::Contains("parallel.pipeline_microbatches") && Catch::Contains("fewer than the 4 stages"));
  CHECK(load("{world_size: 4, pipeline_parallel: 4, pipeline_schedule: gpipe, pipeline_microbatches: 2}")
            .parallel.mesh.microbatches() == 2);
}

TEST_CASE("interleaved 1F1B needs virtual stages and virtual stages need an interleaved schedule",
          "[parallel][loader][mesh]") {
  CHECK_THROWS_WITH(load("{world_size: 4, pipeline_parallel: 4, pipeline_schedule: interleaved_1f1b}"),
                    Catch::Contains("parallel.pipeline_schedule") && Catch::Contains("pipeline_virtual_stages"));
  CHECK_THROWS_WITH(load("{world_size: 4, pipeline_parallel: 4, pipeline_virtual_stages: 2}"),
                    Catch::Contains("parallel.pipeline_virtual_stages") && Catch::Contains("interleaved_1f1b"));
}

TEST_CASE("pipeline keys without a pipeline and SP without TP are refused by name", "[parallel][loader][mesh]") {
  CHECK_THROWS_WITH(load("{world_size: 8, engine: ddp, pipeline_microbatches: 8}"),
                    Catch::Contains("parallel.pipeline_microbatches") && Catch::Contains("needs pipeline_parallel"));
  CHECK_THROWS_WITH(load("{world_size: 8, engine: ddp, sequence_parallel: true}"),
                    Catch::Contains("parallel.sequence_parallel") && Catch::Contains("needs tensor_parallel"));
}

TEST_CASE("gradient accumulation beside a pipeline is refused: its microbatches accumulate", "[parallel][loader][mesh]") {
  CHECK_THROWS_WITH(load("{world_size: 4, pipeline_parallel: 4}", "llama-3-8b", "grad_accum_steps: 4\n"),
                    Catch::Contains("parallel.pipeline_parallel") && Catch::Contains("pipeline_microbatches"));
}

TEST_CASE("context parallelism needs flash or efficient attention and a sequence divisible by twice its degree",
          "[parallel][loader][mesh]") {
  CHECK(load("{world_size: 8, context_parallel: 8}", "llama-3-8b", "attention: flash\nprecision: pure_bf16\n").parallel.mesh.context_parallel == 8);
  CHECK_THROWS_WITH(load("{world_size: 8, context_parallel: 8}", "llama-3-8b", "attention: eager\n"),
                    Catch::Contains("parallel.context_parallel") && Catch::Contains("flash or mem_efficient"));
  CHECK_THROWS_WITH(load_scenario_text("model: llama-3-8b\nbatch_size: 1\nseq_len: 4104\nattention: flash\nprecision: pure_bf16\n"
                                       "parallel: {world_size: 8, context_parallel: 8}\n", "x.yaml"),
                    Catch::Contains("parallel.context_parallel") && Catch::Contains("2 x context_parallel"));
}

TEST_CASE("expert parallelism needs experts and must divide them", "[parallel][loader][mesh]") {
  CHECK_THROWS_WITH(load("{world_size: 8, engine: fsdp2, expert_parallel: 8}"),
                    Catch::Contains("parallel.expert_parallel") && Catch::Contains("no experts"));
}

TEST_CASE("model parallelism is refused beside FSDP1 or DeepSpeed and for families it does not model",
          "[parallel][loader][mesh]") {
  CHECK_THROWS_WITH(load("{world_size: 16, tensor_parallel: 8, fsdp: {}}"),
                    Catch::Contains("parallel.tensor_parallel") && Catch::Contains("fsdp2 or ddp"));
  CHECK_THROWS_WITH(load_scenario_text("model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel: {world_size: 2, tensor_parallel: 2}\n",
                                       "x.yaml"),
                    Catch::Contains("parallel.tensor_parallel") && Catch::Contains("llama family"));
}

TEST_CASE("HSDP replicas need FSDP2 and count in the mesh", "[parallel][loader][mesh]") {
  Scenario s = load("{world_size: 64, engine: fsdp2, data_parallel_replicate: 4, tensor_parallel: 2}");
  CHECK(s.parallel.data_parallel_shard() == 8);
  CHECK_THROWS_WITH(load("{world_size: 8, engine: ddp, data_parallel_replicate: 2}"),
                    Catch::Contains("parallel.data_parallel_replicate") && Catch::Contains("fsdp2"));
}

TEST_CASE("a mesh without world_size is refused", "[parallel][loader][mesh]") {
  CHECK_THROWS_WITH(load("{tensor_parallel: 8}"), Catch::Contains("'parallel' needs 'world_size'"));
}
