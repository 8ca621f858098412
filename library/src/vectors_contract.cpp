// Contract suites (vectors/SPEC.md "Contract suites"): every pass of a named precision contract
// (lowbit/contract.hpp) on seeded inputs, with every stage of the run as an expected file.  The output is
// required of a subject; the intermediates (quantized operands, accumulator, epilogue steps, amax) are
// compared where the subject supplies them, as `lowbit contract check` compares them.
#include <bit>
#include <cstdio>
#include <stdexcept>

#include "lowbit/contract.hpp"
#include "lowbit/convert.hpp"
#include "vectors_internal.hpp"

namespace lowbit::vectors::detail {

namespace {

namespace K = lowbit::contract;
using json = nlohmann::json;

// The committed suites' shapes, one per pass: the reduction 160 (one whole promotion block of 128 and a
// partial one of 32; five MX blocks, ten NVFP4 blocks and groups of the Hadamard transform), the other two
// dimensions 16 and 24 (a partial 128x128 weight tile, one and a half 16x16 tiles).
GemmShape default_shape(K::Pass p) {
  switch (p) {
    case K::Pass::fprop: return {16, 24, 160};  // X [16, 160], W [24, 160]
    case K::Pass::dgrad: return {16, 160, 24};  // dY [16, 160], W [160, 24]
    case K::Pass::wgrad: return {160, 16, 24};  // dY [160, 16], X [160, 24]
  }
  return {16, 24, 160};
}

// The kinds of input: random values (2^-4 .. 2^2); edges (a zero row, a row of outliers 2^10 .. 2^12, and
// one element 2^20); nonfinite (a NaN, +Inf and -Inf among random values).
enum class InputKind : std::uint8_t { random, edges, nonfinite };
constexpr const char* kind_name(InputKind k) {
  return k == InputKind::random ? "random" : k == InputKind::edges ? "edges" : "nonfinite";
}

// A random f32 value of sign, exponent 2^lo .. 2^hi and significand drawn from the stream.
std::uint32_t random_f32(Rng& rng, int lo, int hi) {
  const std::uint64_t r = rng.next();
  const auto e =
      static_cast<std::uint32_t>(127 + lo + static_cast<int>(rng.below(static_cast<std::uint64_t>(hi - lo + 1))));
  return static_cast<std::uint32_t>(((r >> 40) & 1) << 31) | (e << 23) | static_cast<std::uint32_t>(r & 0x7fffff);
}

// A rows x cols tensor of `storage` codes: f32 values rounded once (nearest even) into the storage format.
K::Array tensor(const Format& storage, int rows, int cols, InputKind kind, Rng& rng) {
  K::Array a{&storage, {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)}, {}};
  a.codes.resize(static_cast<std::size_t>(rows) * cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      const bool outlier = kind == InputKind::edges && i == 1;  // a row 2^10 .. 2^12
      std::uint32_t bits = random_f32(rng, outlier ? 10 : -4, outlier ? 12 : 2);
      if (kind == InputKind::edges && i == 0) bits = 0;  // a zero row (its values drawn all the same)
      a.codes[static_cast<std::size_t>(i) * cols + j] = convert(formats::f32, bits, storage, Policy{}).code;
    }
  const std::size_t n = a.codes.size();
  // One element 2^20 times larger than the outlier row's scale of 2^10: a per-tensor amax far above the rest
  // (the largest storage value would overflow the product of two decode scales in f32, an order of the
  // kernel's epilogue that no contract here has confirmed).
  if (kind == InputKind::edges && rows > 2)
    a.codes[static_cast<std::size_t>(2) * cols] = convert(formats::f32, 0x49800000u /* 2^20 */, storage, Policy{}).code;
  if (kind == InputKind::nonfinite) {
    a.codes[n / 3] = storage.nan_code(false);
    a.codes[n / 2] = storage.encode(false, storage.inf_magnitude());
    a.codes[(2 * n) / 3] = storage.encode(true, storage.inf_magnitude());
  }
  return a;
}

bool rounds_stochastically(const K::Quantization& q) {
  return q.recipe && is_stochastic(q.options.element_policy.rounding);
}

File array_file(const std::string& path, const std::string& role, const std::string& name, const K::Array& a) {
  return npy_file(path, role, name, *a.format, a.shape, a.codes);
}

}  // namespace

Suite contract_suite(const std::string& suite, const std::string& contract, std::uint64_t seed,
                     const std::vector<GemmShape>* custom) {
  const std::optional<K::Contract> c = K::find_named(contract);
  if (!c) throw std::invalid_argument("--suite: unknown contract '" + contract + "' (see `lowbit contract list`)");
  Suite s;
  s.name = suite;
  json cases = json::array();
  int index = 0;
  for (const K::PassContract& pc : c->passes) {
    const std::vector<GemmShape> shapes = custom ? *custom : std::vector<GemmShape>{default_shape(pc.pass)};
    for (const GemmShape& sh : shapes)
      for (const InputKind kind : {InputKind::random, InputKind::edges, InputKind::nonfinite}) {
        const std::string label = std::string(name(pc.pass)) + "/" + kind_name(kind) + "-" + std::to_string(sh.m) +
                                  "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k);
        Rng rng(seed, suite + "/" + label);
        // The layer's tensors the pass reads: X [M, K], W [N, K], dY [M, N], in that order of draws.
        const K::PassOperands ops = K::operands_of(pc.pass);
        K::Inputs in;
        auto reads = [&](K::Operand t) { return t == ops.a || t == ops.b; };
        // An operand stored already quantized is drawn in bf16 and quantized by its storage's scheme, as
        // a checkpoint's exporter would have.
        auto draw = [&](K::Operand t, int rows, int cols, std::optional<K::Array>& slot) {
          if (!reads(t)) return;
          if (!c->stored_of(t)) {
            slot = tensor(c->storage_of(t), rows, cols, kind, rng);
            return;
          }
          for (auto& [key, part] : K::store(*c, t, tensor(formats::bf16, rows, cols, kind, rng)))
            in.stored[key] = std::move(part);
        };
        draw(K::Operand::x, sh.m, sh.k, in.x);
        draw(K::Operand::w, sh.n, sh.k, in.w);
        draw(K::Operand::dy, sh.m, sh.n, in.dy);
        // The output's shape, rows x cols (fprop [M, N], dgrad [M, K], wgrad [N, K]).
        const int rows = pc.pass == K::Pass::wgrad ? sh.n : sh.m;
        const int cols = pc.pass == K::Pass::fprop ? sh.n : sh.k;
        for (const K::Step& st : pc.epilogue) {
          if (st.kind == K::StepKind::bias) {
            in.bias = tensor(*st.format, 1, cols, InputKind::random, rng);
            in.bias->shape = {static_cast<std::uint64_t>(cols)};
          }
          if (st.kind == K::StepKind::residual) in.residual = tensor(*st.format, rows, cols, InputKind::random, rng);
        }
        json recipe = {{"pass", name(pc.pass)}};
        if (rounds_stochastically(pc.a) || rounds_stochastically(pc.b)) {
          in.sr_seed = rng.next() >> 32;
          recipe["sr_seed"] = *in.sr_seed;
        }
        const K::RunResult r = K::run(*c, pc.pass, in);
        char id[32];
        std::snprintf(id, sizeof id, "case-%03d", index);
        const std::string dir = id;
        auto with_case = [&](File f) {
          f.meta["case"] = index;
          s.files.push_back(std::move(f));
        };
        for (const auto& [key, slot] : {std::pair{"x", &in.x}, std::pair{"w", &in.w}, std::pair{"dy", &in.dy},
                                        std::pair{"bias", &in.bias}, std::pair{"residual", &in.residual}})
          if (*slot) with_case(array_file(dir + "/" + key + ".npy", "input", key, **slot));
        for (const auto& [key, part] : in.stored) with_case(array_file(dir + "/" + key + ".npy", "input", key, part));
        for (const K::Stage& st : r.stages) {
          const std::string file = st.file();
          File f = array_file(dir + "/" + file, "expected", file.substr(0, file.size() - 4), st.array);
          // A subject must give the output; every other stage is compared where it is supplied.
          if (st.name != "output") f.meta["optional"] = true;
          with_case(std::move(f));
        }
        cases.push_back({{"index", index}, {"name", label}, {"recipe", recipe}, {"shape", {sh.m, sh.n, sh.k}}});
        ++index;
      }
  }
  s.manifest["kind"] = "contract";
  s.manifest["contract"] = c->name;
  s.manifest["hardware"] = name(c->hardware);
  s.manifest["document"] = c->document;
  s.manifest["profile"] = nullptr;
  s.manifest["cases"] = cases;
  return s;
}

}  // namespace lowbit::vectors::detail
