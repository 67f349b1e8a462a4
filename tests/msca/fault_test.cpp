// What a refusal means: the documented HRESULTs and the fault codes without one.
#include "certfleet/msca/protocol.hpp"

#include <gtest/gtest.h>

using namespace certfleet::msca;

namespace {
soap_fault with_code(std::int64_t code) {
  soap_fault f;
  f.code = "s:Receiver";
  f.error_code = code;
  return f;
}
}  // namespace

TEST(msca_fault, classifies_documented_hresults) {
  EXPECT_EQ(classify_fault(with_code(-2146877422)), failure_class::template_not_allowed);  // 0x80094012
  EXPECT_EQ(classify_fault(with_code(0x80094012)), failure_class::template_not_allowed);   // written unsigned
  EXPECT_EQ(classify_fault(with_code(0x80094800)), failure_class::template_not_allowed);
  EXPECT_EQ(classify_fault(with_code(0x80094014)), failure_class::denied);
  EXPECT_EQ(classify_fault(with_code(0x80094011)), failure_class::denied);
  EXPECT_EQ(classify_fault(with_code(0x800706BA)), failure_class::ca_unavailable);
  EXPECT_EQ(classify_fault(with_code(0x80070005)), failure_class::auth);
  EXPECT_EQ(classify_fault(with_code(0x80094811)), failure_class::bad_request);
  EXPECT_EQ(classify_fault(with_code(0x80094001)), failure_class::bad_request);
  EXPECT_EQ(classify_fault(with_code(0x80004005)), failure_class::other);  // E_FAIL: says nothing
}

TEST(msca_fault, classifies_faults_without_an_hresult) {
  soap_fault f;
  f.code = "s:Sender";
  f.subcode = "a:FailedAuthentication";
  EXPECT_EQ(classify_fault(f), failure_class::auth);
  f.subcode = "a:DestinationUnreachable";
  EXPECT_EQ(classify_fault(f), failure_class::ca_unavailable);
  f.subcode = "";
  f.invalid_request = true;
  EXPECT_EQ(classify_fault(f), failure_class::bad_request);
  f.invalid_request = false;
  EXPECT_EQ(classify_fault(f), failure_class::other);
}

TEST(msca_fault, hresult_out_of_range_is_no_hresult) {
  EXPECT_EQ(hresult_text(-2146877422), "0x80094012");
  EXPECT_EQ(hresult_text(0x80094012), "0x80094012");
  EXPECT_EQ(hresult_text(0), "0x00000000");
  EXPECT_EQ(hresult_text(0x100000000LL), "4294967296");
  EXPECT_EQ(hresult_text(-2147483649LL), "-2147483649");
  EXPECT_EQ(hresult_text(INT64_MIN), std::to_string(INT64_MIN));
  EXPECT_EQ(classify_fault(with_code(0x100000000LL + 0x80094012)), failure_class::other);
  EXPECT_EQ(hresult_name(-2146877422), "CERTSRV_E_TEMPLATE_DENIED");
  EXPECT_EQ(hresult_name(0x800706BA), "RPC_S_SERVER_UNAVAILABLE");
  EXPECT_EQ(hresult_name(12345), "");
}

TEST(msca_fault, class_names) {
  EXPECT_EQ(failure_class_name(failure_class::auth), "msca_auth");
  EXPECT_EQ(failure_class_name(failure_class::template_not_allowed), "msca_template_not_allowed");
  EXPECT_EQ(failure_class_name(failure_class::denied), "msca_denied");
  EXPECT_EQ(failure_class_name(failure_class::pending), "msca_pending");
  EXPECT_EQ(failure_class_name(failure_class::ca_unavailable), "msca_ca_unavailable");
  EXPECT_EQ(failure_class_name(failure_class::bad_request), "msca_bad_request");
  EXPECT_EQ(failure_class_name(failure_class::other), "msca_other");
}
