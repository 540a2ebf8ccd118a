// Tests of the job, training, weights and loading sections of a scenario.
#include "scenario/job_config_loader.h"

#include <catch2/catch.hpp>

#include "scenario/scenario_loader.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

using testing::error_of;

const std::string kBase = "model: gpt2-tiny\nbatch_size: 2\nseq_len: 32\n";

Scenario load(const std::string& extra, const std::vector<std::string>& overrides = {}) {
  return load_scenario_text(kBase + extra, "s.yaml", overrides);
}

std::string load_error(const std::string& extra) {
  return error_of([&] { load(extra); });
}

TEST_CASE("job: inference runs as many batches as iterations and holds the loss by default", "[scenario][jobs]") {
  Scenario s = load("iterations: 4\njob: inference\n");
  CHECK(s.job.job.kind == JobKind::Inference);
  CHECK(s.job.job.batches == 4);
  CHECK(s.job.job.eval_mode);
  CHECK(s.job.job.held_outputs == std::vector<std::string>{"loss"});
}

TEST_CASE("a job override reaches inside the shorthand", "[scenario][jobs]") {
  Scenario s = load("job: inference\n", {"job.outputs=logits", "job.batches=2"});
  CHECK_FALSE(s.job.job.compute_loss);
  CHECK(s.job.job.batches == 2);
  CHECK(s.job.job.held_outputs == std::vector<std::string>{"logits"});
}

TEST_CASE("holding a loss that the job does not compute is an error at the key", "[scenario][jobs]") {
  CHECK_THAT(load_error("job: {kind: inference, outputs: logits, held_outputs: [loss]}\n"),
             Catch::Contains("s.yaml:4") && Catch::Contains("job.held_outputs"));
}

TEST_CASE("lora written directly under training says it goes under training.trainable", "[scenario][jobs]") {
  CHECK_THAT(load_error("training: {lora: {r: 16, target_modules: [c_attn]}}\n"),
             Catch::Contains("s.yaml:4") && Catch::Contains("training.lora") && Catch::Contains("training.trainable"));
}

TEST_CASE("LoRA needs target_modules and reads PEFT's names", "[scenario][jobs]") {
  CHECK_THAT(load_error("training: {trainable: {lora: {r: 8}}}\n"), Catch::Contains("target_modules"));
  Scenario s = load("training: {trainable: {lora: {r: 16, lora_alpha: 32, lora_dropout: 0.05, target_modules: [c_attn]}}}\n");
  CHECK(s.job.training.lora.enabled);
  CHECK(s.job.training.lora.r == 16);
  CHECK(s.job.training.lora.alpha == 32.0);
  CHECK(s.job.training.lora.dropout == 0.05);
  CHECK(s.job.training.kind == TrainableKind::None);
}

TEST_CASE("training nothing in a training job is an error that names the forward-only jobs", "[scenario][jobs]") {
  CHECK_THAT(load_error("training: {trainable: none}\n"), Catch::Contains("job: inference"));
}

TEST_CASE("quantized weights on the cpu device are an error", "[scenario][jobs]") {
  CHECK_THAT(load_error("device: cpu\nweights: nf4\n"), Catch::Contains("bitsandbytes"));
}

TEST_CASE("master_weights false applies only to pure_bf16", "[scenario][jobs]") {
  CHECK_THAT(load_error("training: {master_weights: false}\n"), Catch::Contains("pure_bf16"));
  CHECK_FALSE(load("precision: pure_bf16\ntraining: {master_weights: false}\n").job.training.master_weights);
}

TEST_CASE("master_weights false acts under DDP, FSDP and FSDP2 and is refused where the engine keeps fp32 copies",
          "[scenario][jobs]") {
  const std::string bf16 = "precision: pure_bf16\ntraining: {master_weights: false}\n";
  for (const char* engine : {"ddp: {}", "fsdp: {}", "fsdp2: {}"}) {
    INFO(engine);
    CHECK_FALSE(load(bf16 + "parallel: {world_size: 2, " + engine + "}\n").job.training.master_weights);
  }
  CHECK_THAT(load_error(bf16 + "parallel: {world_size: 2, deepspeed: {bf16: {enabled: true}}}\n"),
             Catch::Contains("training.master_weights") && Catch::Contains("DeepSpeed"));
  CHECK_THAT(load_error(bf16 + "parallel: {world_size: 2, fsdp: {mixed_precision: {param_dtype: bf16}}}\n"),
             Catch::Contains("training.master_weights") && Catch::Contains("mixed_precision"));
  CHECK_THAT(load_error(bf16 + "parallel: {world_size: 2, fsdp2: {mixed_precision: {param_dtype: bf16}}}\n"),
             Catch::Contains("training.master_weights") && Catch::Contains("mixed_precision"));
}

TEST_CASE("optimizer.in_backward is refused with gradient accumulation and parallel engines", "[scenario][jobs]") {
  CHECK_THAT(load_error("grad_accum_steps: 2\noptimizer: {in_backward: true}\n"), Catch::Contains("accumulate"));
  CHECK_THAT(load_error("optimizer: {in_backward: true}\nparallel: {world_size: 2, ddp: {}}\n"),
             Catch::Contains("optimizer.in_backward"));
  CHECK(load("optimizer: {in_backward: true}\n").optimizer.in_backward);
}

TEST_CASE("LoRA's autocast_adapter_dtype reads as PEFT names it", "[scenario][jobs]") {
  const std::string lora = "training: {trainable: {lora: {target_modules: [c_attn], ";
  CHECK_FALSE(load(lora + "autocast_adapter_dtype: false}}}\n").job.training.lora.autocast_adapter_dtype);
  CHECK(load(lora + "r: 4}}}\n").job.training.lora.autocast_adapter_dtype);
}

TEST_CASE("DoRA is LoRA's use_dora, refused with lora_dropout and on quantized weights", "[scenario][jobs]") {
  const std::string lora = "training: {trainable: {lora: {target_modules: [c_attn], ";
  CHECK(load(lora + "use_dora: true}}}\n").job.training.lora.use_dora);
  CHECK_THAT(load_error(lora + "lora_dropout: 0.1, use_dora: true}}}\n"), Catch::Contains("lora_dropout"));
  CHECK_THAT(load_error(lora + "use_dora: true}}}\nweights: nf4\ndevice: a100-80gb\n"), Catch::Contains("QDoRA"));
}

TEST_CASE("IA3 reads PEFT's target_modules and feedforward_modules, the latter a subset", "[scenario][jobs]") {
  Scenario s = load("training: {trainable: {ia3: {target_modules: [c_attn, c_fc], feedforward_modules: [c_fc]}}}\n");
  CHECK(s.job.training.ia3.enabled);
  CHECK(s.job.training.ia3.feedforward_modules == std::vector<std::string>{"c_fc"});
  CHECK_THAT(load_error("training: {trainable: {ia3: {target_modules: [c_attn], feedforward_modules: [c_fc]}}}\n"),
             Catch::Contains("subset"));
}

TEST_CASE("PEFT methods other than LoRA and IA3 are refused by their names", "[scenario][jobs]") {
  for (const char* method : {"prompt_tuning", "prefix_tuning", "vera", "oft", "loha", "lokr", "trainable_tokens"}) {
    INFO(method);
    CHECK_THAT(load_error(std::string("training: {trainable: {") + method + ": {}}}\n"),
               Catch::Contains(std::string("PEFT method '") + method + "'"));
  }
}

TEST_CASE("an unknown key in the job section gets a did-you-mean", "[scenario][jobs]") {
  CHECK_THAT(load_error("job: {kind: inference, bacthes: 3}\n"), Catch::Contains("batches"));
}

TEST_CASE("weights.library torchao stores nf4 as torchtune does, and runs on the cpu device", "[scenario][jobs]") {
  Scenario s = load("weights: {format: nf4, library: torchao}\ndevice: cpu\n");
  CHECK(s.job.weights.library == QuantLibrary::Torchao);
}

TEST_CASE("torchao's library refuses int8 and fp4 weights", "[scenario][jobs]") {
  CHECK_THAT(load_error("weights: {format: fp4, library: torchao}\n"), Catch::Contains("stores nf4 only"));
}

TEST_CASE("torchao's NF4 always quantizes its scalers", "[scenario][jobs]") {
  CHECK_THAT(load_error("weights: {format: nf4, library: torchao, double_quant: false}\n"), Catch::Contains("double_quant"));
}

TEST_CASE("torchao's QLoRA is built on the device: from_pretrained is refused", "[scenario][jobs]") {
  CHECK_THAT(load_error("weights: {format: nf4, library: torchao}\nloading: from_pretrained\n"),
             Catch::Contains("must be on_device"));
}

TEST_CASE("prepare_model_for_kbit_training applies to bitsandbytes weights only", "[scenario][jobs]") {
  CHECK(load("weights: nf4\ndevice: a100-80gb\ntraining: {prepare_model_for_kbit_training: true}\n").job.training.prepare_kbit);
  CHECK_THAT(load_error("training: {prepare_model_for_kbit_training: true}\n"), Catch::Contains("bitsandbytes-quantized"));
}

}  // namespace
}  // namespace oomcast::scenario
