#include "case_fields.hpp"

#include <limits>
#include <utility>

namespace cgemm::plan {

namespace {

std::string type_of(const Json& j) { return j.type_name(); }

}  // namespace

std::string brief(const Json& j) {
  std::string text = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  constexpr size_t kMax = 80;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

void check_rank(const Json& j, const std::string& what) {
  if (j.is_array() && j.size() > static_cast<size_t>(kMaxNdim)) {
    throw CaseError("'" + what + "' has " + std::to_string(j.size()) + " entries, more than " +
                    cap_name("ndim", kMaxNdim));
  }
}

const Json& field(const Json& obj, const char* key, const std::string& where) {
  if (!obj.is_object()) {
    throw CaseError(where + " must be an object, got " + type_of(obj));
  }
  const auto it = obj.find(key);
  if (it == obj.end()) {
    throw CaseError("missing field '" + (where.empty() ? "" : where + ".") + key + "'");
  }
  return *it;
}

std::string path(const std::string& where, const char* key) {
  return where.empty() ? std::string(key) : where + "." + key;
}

int64_t as_int64(const Json& j, const std::string& what) {
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw CaseError("'" + what + "' is out of range: " + brief(j));
    }
    return static_cast<int64_t>(j.get<uint64_t>());
  }
  if (!j.is_number_integer()) {
    throw CaseError("'" + what + "' must be an integer, got " + type_of(j) + " " + brief(j));
  }
  return j.get<int64_t>();
}

int as_int(const Json& j, const std::string& what) {
  const int64_t v = as_int64(j, what);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw CaseError("'" + what + "' is out of range: " + brief(j));
  }
  return static_cast<int>(v);
}

int64_t as_nonneg(const Json& j, const std::string& what) {
  const int64_t v = as_int64(j, what);
  if (v < 0) throw CaseError("'" + what + "' must be non-negative, got " + std::to_string(v));
  return v;
}

bool as_bool(const Json& j, const std::string& what) {
  if (!j.is_boolean()) {
    throw CaseError("'" + what + "' must be a boolean, got " + type_of(j) + " " + brief(j));
  }
  return j.get<bool>();
}

const std::string& as_string(const Json& j, const std::string& what) {
  if (!j.is_string()) {
    throw CaseError("'" + what + "' must be a string, got " + type_of(j) + " " + brief(j));
  }
  return j.get_ref<const std::string&>();
}

Shape as_shape(const Json& j, const std::string& what) {
  if (!j.is_array()) {
    throw CaseError("'" + what + "' must be an array of non-negative integers, got " + type_of(j));
  }
  check_rank(j, what);
  Shape s;
  for (size_t i = 0; i < j.size(); ++i) {
    s.push_back(as_nonneg(j[i], what + "[" + std::to_string(i) + "]"));
  }
  return s;
}

std::vector<int> as_dims(const Json& j, const std::string& what) {
  if (!j.is_array()) throw CaseError("'" + what + "' must be an array of integers");
  check_rank(j, what);
  std::vector<int> dims;
  for (size_t i = 0; i < j.size(); ++i) {
    dims.push_back(as_int(j[i], what + "[" + std::to_string(i) + "]"));
  }
  return dims;
}

ContractingDims as_contracting_dims(const Json& j) {
  if (!j.is_array() || j.size() != 2) {
    throw CaseError("'contracting_dims' must be [[lhs dims...], [rhs dims...]], got " + brief(j));
  }
  return {as_dims(j[0], "contracting_dims[0]"), as_dims(j[1], "contracting_dims[1]")};
}

std::optional<std::string> as_resource(const Json& j, const std::string& what) {
  if (j.is_null()) return std::nullopt;
  return as_string(j, what);
}

std::optional<PartitionSpec> spec_from_json(const Json& j, const std::string& what) {
  if (j.is_null()) return std::nullopt;
  if (!j.is_array()) {
    throw CaseError("'" + what + "' must be null or an array of entries, got " + type_of(j));
  }
  check_rank(j, what);
  PartitionSpec spec;
  for (size_t i = 0; i < j.size(); ++i) {
    const Json& e = j[i];
    const std::string ewhat = what + "[" + std::to_string(i) + "]";
    if (e.is_null()) {
      spec.push_back(SpecEntry::none());
    } else if (e.is_string()) {
      spec.push_back(SpecEntry::axis(e.get<std::string>()));
    } else if (e.is_array()) {
      // An empty tuple would be indistinguishable from None in this encoding.
      if (e.empty()) throw CaseError("'" + ewhat + "': a tuple entry needs at least one axis");
      std::vector<std::string> names;
      for (size_t k = 0; k < e.size(); ++k) {
        names.push_back(as_string(e[k], ewhat + "[" + std::to_string(k) + "]"));
      }
      spec.push_back(SpecEntry::tuple(std::move(names)));
    } else {
      throw CaseError("'" + ewhat + "' must be null, an axis name or an array of axis names, got " +
                      brief(e));
    }
  }
  return spec;
}

}  // namespace cgemm::plan
