// Text Generation Inference (TGI): a member of the Python reference family by the issue's
// definition. The specs record nothing engine-specific about it.
#include "engines/profiles.h"

namespace ckpt::engines::detail {

Profile tgi_profile() {
  Profile p;
  p.name = "tgi";
  p.title = "Hugging Face Text Generation Inference";
  p.family = "python-reference";
  p.reference = true;
  p.weights_format = "safetensors";
  p.dialect = {DialectKind::python_jinja2, "jinja2", {3, 1, 6},
               "TGI renders chat templates in its Rust router with minijinja; the specs record no minijinja "
               "behaviour, so ckpt judges TGI's templates with the Python reference (unverified)",
               "not in the specs (TGI router, minijinja)"};
  p.notes = {
      "loader strictness, quantization schemes and config handling are not recorded in the specs: ckpt "
      "gives TGI the portable verdict",
      "its template engine (minijinja) is not modelled: template findings are the Python reference's",
  };
  return p;
}

}  // namespace ckpt::engines::detail
