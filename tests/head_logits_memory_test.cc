// The head's stage under 16-bit training holds the current micro-batch's logits twice: the
// output layer's 16-bit output beside the fp32 copy the loss runs on (Megatron-Core's
// vocab_parallel_cross_entropy(logits.float(), labels); torchtitan's pred.float()), and in
// backward the fp32 gradient beside its 16-bit cast (src/cost/memory.cc, docs/cost-model.md).
// Values worked by hand.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "src/cost/memory.h"
#include "src/hardware/hardware_spec.h"
#include "src/layout/layout.h"
#include "src/model/model_spec.h"
#include "tests/test_models.h"

namespace shardsim {
namespace {

// One micro-batch of 2 sequences of 1024 tokens at tp = 2 (T = 2048 rows at the head): doubling
// the vocabulary from 51,200 to 102,400 adds 25,600 words to each rank's shard. The head's
// moment (the peak with this vocabulary) then holds 4 bytes (fp32 probabilities) + 2 bytes (the
// 16-bit logits) per added logit: 6 x 2048 x 25,600 = 314,572,800 bytes more under "other".
// Under fp32 training there is no copy: 4 x 2048 x 25,600 = 209,715,200.
TEST(HeadLogitsMemory, SixteenBitTrainingHoldsTheLogitsTwice) {
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  for (const auto& [dtype, expected] : {std::pair<const char*, double>{"bf16", 314572800.0}, {"fp32", 209715200.0}}) {
    SCOPED_TRACE(dtype);
    const Layout l = testing::ResolvedOnH100(std::string("tp=2,mbs=2,gbs=2,recompute=none,dtype=") + dtype, 2);
    const ModelSpec small = testing::GptModel(2, 1024, 16, 51200, 1024);
    const ModelSpec large = testing::GptModel(2, 1024, 16, 102400, 1024);
    EXPECT_EQ(StageMemory(large, hw, l, 0).other - StageMemory(small, hw, l, 0).other, expected);
  }
}

// The copy is reported apart (MemoryBreakdown::loss_logit_copy) when the head's moment is the
// peak: 2 bytes x 2048 rows x 51,200 / 2 words = 209,715,200 under bf16, none under fp32.
TEST(HeadLogitsMemory, TheCopyIsReportedApart) {
  const HardwareSpec hw = *LoadHardware("dgx-h100");
  const ModelSpec m = testing::GptModel(2, 1024, 16, 102400, 1024);
  EXPECT_EQ(StageMemory(m, hw, testing::ResolvedOnH100("tp=2,mbs=2,gbs=2,recompute=none,dtype=bf16", 2), 0)
                .loss_logit_copy,
            209715200.0);
  EXPECT_EQ(StageMemory(m, hw, testing::ResolvedOnH100("tp=2,mbs=2,gbs=2,recompute=none,dtype=fp32", 2), 0)
                .loss_logit_copy,
            0.0);
}

}  // namespace
}  // namespace shardsim
