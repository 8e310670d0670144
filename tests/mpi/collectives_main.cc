// MPI test program (run by ctest under mpirun -np 4): the runtime's communicators and
// collectives give the values derived below, on the groups of the layout tp=2, dp=2.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/mpi/communicator.h"
#include "runtime/mpi/mpi_collectives.h"

namespace {

int failures = 0, passes = 0;

void Expect(bool ok, const char* what, int rank) {
  if (ok) {
    ++passes;
  } else {
    ++failures;
    std::fprintf(stderr, "rank %d: FAILED %s\n", rank, what);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace shardsim;
  MPI_Init(&argc, &argv);
  Layout l = *ParseLayout("tp=2,dp=2");
  l = *ResolveLayout(l, 4);
  StatusOr<runtime::ProcessGroups> g = runtime::ProcessGroups::Create(l, 30);
  if (!g.ok()) {
    std::fprintf(stderr, "%s\n", g.status().message().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const int me = g->world.rank();
  // Placement tp innermost: ranks {0,1} and {2,3} are TP groups; {0,2} and {1,3} DP groups.
  Expect(g->tp.size() == 2 && g->tp.rank() == me % 2, "tp group", me);
  Expect(g->dp.size() == 2 && g->dp.rank() == me / 2, "dp group", me);
  Expect(g->pp.size() == 1 && g->cp.size() == 1, "pp and cp groups of one", me);

  // All-reduce over TP of x = rank + 1 (3 elements each): group {0,1} sums 1 + 2 = 3,
  // group {2,3} sums 3 + 4 = 7.
  std::vector<float> x(3, static_cast<float>(me + 1));
  Expect(g->tp.AllReduceSum(x.data(), x.size()).ok(), "all-reduce ok", me);
  const float want = me < 2 ? 3.0f : 7.0f;
  Expect(x[0] == want && x[2] == want, "all-reduce value", me);

  // Reduce-scatter over DP: each rank holds blocks [r, 10 r] (one float per block); block i
  // summed over the DP group {d0, d1}: rank 0 and 2 -> block 0 = 0 + 2 = 2; block 1 =
  // 0 + 20 = 20.
  const float in[2] = {static_cast<float>(me), 10.0f * me};
  float out = -1;
  Expect(g->dp.ReduceScatterSum(in, &out, 1).ok(), "reduce-scatter ok", me);
  const int a = me % 2, b = me % 2 + 2;  // the DP group's world ranks
  const float block = g->dp.rank() == 0 ? static_cast<float>(a + b) : 10.0f * (a + b);
  Expect(out == block, "reduce-scatter value", me);

  // All-gather over DP of the world rank: both members see [a, b].
  float mine = static_cast<float>(me), all[2] = {-1, -1};
  Expect(g->dp.AllGather(&mine, all, 1).ok(), "all-gather ok", me);
  Expect(all[0] == a && all[1] == b, "all-gather value", me);

  // Send/recv around the world: rank r sends r * 1.5 to r + 1.
  const int next = (me + 1) % 4, prev = (me + 3) % 4;
  float send = 1.5f * me, recv = -1;
  if (me % 2 == 0) {
    Expect(g->world.Send(&send, 1, next, 7).ok(), "send", me);
    Expect(g->world.Recv(&recv, 1, prev, 7).ok(), "recv", me);
  } else {
    Expect(g->world.Recv(&recv, 1, prev, 7).ok(), "recv", me);
    Expect(g->world.Send(&send, 1, next, 7).ok(), "send", me);
  }
  Expect(recv == 1.5f * prev, "send/recv value", me);

  // A receive nobody sends times out with a message naming the rank, not a hang; the others,
  // waiting in the barrier, answer its pings, so none is named as stopped.
  runtime::Communicator quick = *runtime::Communicator::World(0.2);
  float never = 0;
  if (me == 0) {
    const Status st = quick.Recv(&never, 1, 1, 99);
    Expect(!st.ok() && st.message().find("rank 0") != std::string::npos &&
               st.message().find("did not complete within 0.2 s") != std::string::npos &&
               st.message().find("every other member of the group answers") != std::string::npos,
           "timeout error", me);
  }
  Expect(g->world.Barrier().ok(), "barrier", me);

  // MpiCollectives (backend.h's Collectives) over a copy of the same groups.
  {
    using runtime::Group;
    runtime::MpiCollectives mc(*g);
    Expect(mc.size(Group::kTp) == 2 && mc.rank(Group::kDp) == me / 2 &&
               mc.size(Group::kWorld) == 4 && mc.size(Group::kPp) == 1,
           "MpiCollectives groups", me);
    // All-reduce over TP of 10 (rank + 1): {0,1} -> 10 + 20 = 30, {2,3} -> 30 + 40 = 70.
    float y[2] = {10.0f * (me + 1), 10.0f * (me + 1)};
    Expect(mc.AllReduceSum(Group::kTp, y, 2).ok(), "MpiCollectives all-reduce ok", me);
    Expect(y[1] == (me < 2 ? 30.0f : 70.0f), "MpiCollectives all-reduce value", me);
    // Ring on the world: every rank posts its send (2.5 r to r + 1) before receiving, so no
    // rank blocks; the receive from r - 1 holds 2.5 (r - 1).
    const float ring_send = 2.5f * me;
    float ring_recv = -1;
    StatusOr<int64_t> h = mc.Isend(Group::kWorld, &ring_send, 1, next, 11);
    Expect(h.ok(), "MpiCollectives isend", me);
    Expect(mc.Recv(Group::kWorld, &ring_recv, 1, prev, 11).ok(), "MpiCollectives recv", me);
    if (h.ok()) Expect(mc.Wait(*h).ok(), "MpiCollectives wait-send", me);
    Expect(ring_recv == 2.5f * prev, "MpiCollectives ring value", me);
    // All-gather of host doubles over DP of rank + 0.5: both members see [a + 0.5, b + 0.5].
    const double mine_d = me + 0.5;
    double all_d[2] = {-1, -1};
    Expect(mc.AllGatherHost(Group::kDp, &mine_d, all_d, 1).ok(), "MpiCollectives all-gather ok",
           me);
    Expect(all_d[0] == a + 0.5 && all_d[1] == b + 0.5, "MpiCollectives all-gather value", me);

    // bf16 data (runtime::Bf16, 2 bytes an element; small integers and halves are exact).
    using runtime::Bf16;
    using runtime::ToBf16;
    using runtime::ToFloat;
    // All-reduce over TP. Element 0: rank + 1, summing to 3 ({0,1}) and 7 ({2,3}), exact.
    // Elements 1 and 2 show each sum is rounded to bf16 (8 significant bits: a step of 2 in
    // [256, 512)) to nearest even: TP rank 0 holds 256, TP rank 1 holds 1 and 3.
    //   256 + 1 = 257, halfway between 256 (mantissa 0, even) and 258 (odd): 256.
    //   256 + 3 = 259, halfway between 258 (odd) and 260 (even): 260 (truncation gives 258).
    const bool tp0 = me % 2 == 0;
    Bf16 hb[3] = {ToBf16(me + 1.0f), ToBf16(tp0 ? 256.0f : 1.0f), ToBf16(tp0 ? 256.0f : 3.0f)};
    Expect(mc.AllReduceSum(Group::kTp, hb, 3).ok(), "bf16 all-reduce ok", me);
    Expect(ToFloat(hb[0]) == (me < 2 ? 3.0f : 7.0f), "bf16 all-reduce value", me);
    Expect(ToFloat(hb[1]) == 256.0f && ToFloat(hb[2]) == 260.0f,
           "bf16 all-reduce rounds each sum to nearest even", me);
    // Reduce-scatter over DP, as the fp32 one above: blocks [r, 10 r]; DP rank 0 of the group
    // {a, b} receives a + b, DP rank 1 receives 10 (a + b) (2 or 4; 20 or 40: exact). A third
    // element of out, 99, lies past the one-element block and must stay.
    const Bf16 rs_in[2] = {ToBf16(static_cast<float>(me)), ToBf16(10.0f * me)};
    Bf16 rs_out[2] = {ToBf16(-1.0f), ToBf16(99.0f)};
    Expect(mc.ReduceScatterSum(Group::kDp, rs_in, rs_out, 1).ok(), "bf16 reduce-scatter ok", me);
    Expect(ToFloat(rs_out[0]) == block && ToFloat(rs_out[1]) == 99.0f, "bf16 reduce-scatter value",
           me);
    // The non-blocking bf16 forms give the same values: the all-reduce's three elements and the
    // reduce-scatter's block, as above.
    Bf16 ihb[3] = {ToBf16(me + 1.0f), ToBf16(tp0 ? 256.0f : 1.0f), ToBf16(tp0 ? 256.0f : 3.0f)};
    Bf16 irs_out[2] = {ToBf16(-1.0f), ToBf16(99.0f)};
    StatusOr<int64_t> iar = mc.IallReduceSum(Group::kTp, ihb, 3);
    StatusOr<int64_t> irs = mc.IreduceScatterSum(Group::kDp, rs_in, irs_out, 1);
    Expect(iar.ok() && irs.ok() && mc.Wait(*iar).ok() && mc.Wait(*irs).ok(),
           "bf16 non-blocking all-reduce and reduce-scatter ok", me);
    Expect(ToFloat(ihb[0]) == (me < 2 ? 3.0f : 7.0f) && ToFloat(ihb[1]) == 256.0f &&
               ToFloat(ihb[2]) == 260.0f,
           "bf16 non-blocking all-reduce values", me);
    Expect(ToFloat(irs_out[0]) == block && ToFloat(irs_out[1]) == 99.0f,
           "bf16 non-blocking reduce-scatter value", me);
    // All-gather over DP of (rank, -rank): both members see [a, -a, b, -b].
    const Bf16 ag_in[2] = {ToBf16(static_cast<float>(me)), ToBf16(-static_cast<float>(me))};
    Bf16 ag_out[4];
    Expect(mc.AllGather(Group::kDp, ag_in, ag_out, 2).ok(), "bf16 all-gather ok", me);
    Expect(ToFloat(ag_out[0]) == a && ToFloat(ag_out[1]) == -a && ToFloat(ag_out[2]) == b &&
               ToFloat(ag_out[3]) == -b,
           "bf16 all-gather value", me);
    // Ring of bf16 pairs (1.5 r, -r) to r + 1 under tag 12, with an fp32 message to the same
    // peer under tag 13 posted first: each receive takes the message of its own tag and type,
    // so the pair from r - 1 is (1.5 (r - 1), -(r - 1)), its third slot (7) untouched, and the
    // float is 0.25 (r - 1).
    const Bf16 pair_send[2] = {ToBf16(1.5f * me), ToBf16(-static_cast<float>(me))};
    const float f_send = 0.25f * me;
    Bf16 pair_recv[3] = {ToBf16(-1.0f), ToBf16(-1.0f), ToBf16(7.0f)};
    float f_recv = -1;
    StatusOr<int64_t> hf = mc.Isend(Group::kWorld, &f_send, 1, next, 13);
    StatusOr<int64_t> hp = mc.Isend(Group::kWorld, pair_send, 2, next, 12);
    Expect(hf.ok() && hp.ok(), "bf16 isend", me);
    Expect(mc.Recv(Group::kWorld, pair_recv, 2, prev, 12).ok(), "bf16 recv", me);
    Expect(mc.Recv(Group::kWorld, &f_recv, 1, prev, 13).ok(), "fp32 recv after bf16", me);
    if (hf.ok()) Expect(mc.Wait(*hf).ok(), "fp32 wait-send", me);
    if (hp.ok()) Expect(mc.Wait(*hp).ok(), "bf16 wait-send", me);
    Expect(ToFloat(pair_recv[0]) == 1.5f * prev && ToFloat(pair_recv[1]) == -prev &&
               ToFloat(pair_recv[2]) == 7.0f,
           "bf16 ring value", me);
    Expect(f_recv == 0.25f * prev, "fp32 value beside bf16", me);

    // A receive on the one-rank PP group that nobody sends times out after 0.2 s, the error
    // naming this rank, the group and the operation.
    runtime::MpiCollectives quick_mc(*runtime::ProcessGroups::Create(l, 0.2));
    const Status st = quick_mc.Recv(Group::kPp, &never, 1, 0, 98);
    const std::string want_rank = "rank " + std::to_string(me) + ": MPI recv on the pp group";
    Expect(!st.ok() && st.message().find(want_rank) != std::string::npos &&
               st.message().find("did not complete within") != std::string::npos,
           "MpiCollectives timeout error", me);
  }

  // A layout whose world size differs from mpirun's is rejected before any split.
  StatusOr<runtime::ProcessGroups> wrong = runtime::ProcessGroups::Create(*ResolveLayout(*ParseLayout("tp=2,dp=4"), 8), 5);
  Expect(!wrong.ok() && wrong.status().message().find("mpirun started 4") != std::string::npos,
         "world size mismatch", me);

  int total_failures = 0;
  MPI_Allreduce(&failures, &total_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) std::printf("mpi collectives: %d checks per rank, %d failed in all\n", passes, total_failures);
  MPI_Finalize();
  return total_failures == 0 ? 0 : 1;
}
