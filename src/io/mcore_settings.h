// Megatron-Core settings that change what runs but that shardsim does not model, or prices
// otherwise, checked the same way whether Megatron-LM's arguments (megatron_args.cc) or NeMo's
// recipe overrides (nemo_overrides.cc) give them: refused where they stand rather than priced
// as the default, or read with a warning that says what the price then is. Each format names
// the settings its own way (McoreKeys).
#pragma once

#include <string>
#include <vector>

#include "src/io/located_values.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"

namespace shardsim {

struct McoreKeys {
  std::string owner;         // whose defaults apply: "Megatron-LM", "Megatron-Core"
  std::string tp, ep;        // the TP and EP sizes, for messages
  std::string etp;           // expert tensor-parallel size
  std::string extended_tp;   // the deprecated experts-over-TP-x-EP switch
  std::string dispatcher;    // the MoE token dispatcher
  std::string dispatcher_fix;  // how to ask for alltoall, for the message
  std::string grouped_gemm;  // the experts' grouped GEMM switch
  std::string recompute_modules, cp_comm_type, optimizer_instances, pipeline_layout, microbatch_group, fp4;
  std::vector<std::string> fsdp;        // any of them set: Megatron-Core's FSDP
  std::vector<std::string> bf16_edges;  // bf16 first and last layers under fp8
};
const McoreKeys& MegatronArgumentKeys();
const McoreKeys& NemoOverrideKeys();

// Reads an MoE model's expert tensor-parallel size into `l` (Layout::etp), then checks `l` (the
// parallel sizes, recompute, ZeRO and dtype read) of model `m`: errors into `r`, warnings into
// `warnings`.
void CheckMcoreSettings(LocatedValues& r, const McoreKeys& k, const ModelSpec& m, Layout& l,
                        std::vector<std::string>* warnings);

}  // namespace shardsim
